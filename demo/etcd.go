package demo

import (
	"context"
	"path/filepath"

	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

// etcdBackend is the default DCS: an embedded etcd in the demo's own
// process, which the agents and agentctl reach over loopback. It has no
// objects of its own to prepare or show.
type etcdBackend struct {
	etcd *etcdtest.Server
}

var _ backend = (*etcdBackend)(nil)

// startEtcdBackend starts the embedded etcd of testenv/etcdtest, the tests'
// harness, in the work dir, on the fixed client port unless it is 0.
func startEtcdBackend(cfg Config) (*etcdBackend, error) {
	e, err := etcdtest.Launch(filepath.Join(cfg.Dir, "etcd"), etcdtest.WithClientPort(cfg.EtcdPort))
	if err != nil {
		return nil, err
	}
	return &etcdBackend{etcd: e}, nil
}

// endpoint is etcd's loopback client URL.
func (e *etcdBackend) endpoint() string { return e.etcd.Endpoints()[0] }

func (e *etcdBackend) prepare(context.Context, *progress, []*member) error { return nil }

func (e *etcdBackend) agentArgs(*member) []string {
	return []string{"--dcs=etcd", "--etcd-endpoints=" + e.endpoint()}
}

func (e *etcdBackend) ctlArgs() []string {
	return []string{"--dcs=etcd", "--etcd-endpoints=" + e.endpoint()}
}

func (e *etcdBackend) env() []string {
	return []string{"MYSQLHA_DCS=etcd", "MYSQLHA_ETCD_ENDPOINTS=" + e.endpoint()}
}

func (e *etcdBackend) show(context.Context, *progress, string) error { return nil }

func (e *etcdBackend) live(context.Context) string { return "" }

func (e *etcdBackend) routed(context.Context, string) bool { return true }

func (e *etcdBackend) routedNote() string { return "" }

func (e *etcdBackend) tryLines() []string { return nil }

func (e *etcdBackend) stop() { e.etcd.Stop() }
