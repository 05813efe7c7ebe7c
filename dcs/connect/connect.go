// Package connect opens the configured DCS backend from command-line
// settings, so the agent and agentctl connect the same way: a Kubernetes
// Lease store (kubeconfig file, or in-cluster) or an etcd store.
package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mysqlha/mysqlha/dcs"
	dcsetcd "github.com/mysqlha/mysqlha/dcs/etcd"
	dcskube "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/internal/kubeclient"
)

// Settings select and address the backend.
type Settings struct {
	// Kind is "kubernetes" or "etcd".
	Kind string
	// Kubeconfig is a kubeconfig file; in-cluster config when empty.
	Kubeconfig string
	// RESTConfig, when set, is the Kubernetes client config to use instead
	// of Kubeconfig: agentctl resolves it kubectl's way (contexts,
	// $KUBECONFIG lists) with k8s.io/cli-runtime, which the agent binary
	// does not link.
	RESTConfig *rest.Config
	Namespace  string
	// EtcdEndpoints are comma-separated client URLs.
	EtcdEndpoints string
	EtcdPrefix    string
	Cluster       string
	Member        string
	// Instance is the agent instance id the store writes into the lock and
	// the member record (dcs.ValidateInstance); the store draws a random
	// one when empty. Read it back from Conn.Store.Instance().
	Instance string
	// Etcd is etcd's TLS and authentication.
	Etcd EtcdSecurity
	// Timeout bounds connecting (etcd dial).
	Timeout time.Duration
}

// Conn is an open DCS store and, on Kubernetes, the client it came from.
type Conn struct {
	Store dcs.Store
	// Kube is nil for etcd.
	Kube *kubeclient.Client
	// Clusters lists the names of the clusters the DCS holds (in the
	// namespace, or under the etcd prefix).
	Clusters func(ctx context.Context) ([]string, error)
	// Where names the DCS for errors: the backend, its address and the
	// namespace or key prefix.
	Where string
	close func()
}

// Close stops the store and its client.
func (c *Conn) Close() {
	c.Store.Close()
	if c.close != nil {
		c.close()
	}
}

// Open connects to the backend Settings name.
func Open(s Settings, log *zap.Logger) (*Conn, error) {
	switch s.Kind {
	case "etcd":
		if s.EtcdEndpoints == "" {
			return nil, errors.New("--dcs=etcd needs --etcd-endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
		}
		tlsCfg, err := s.Etcd.tlsConfig()
		if err != nil {
			return nil, err
		}
		user, password, err := s.Etcd.credentials()
		if err != nil {
			return nil, err
		}
		endpoints := strings.Split(s.EtcdEndpoints, ",")
		if tlsCfg != nil {
			for _, e := range endpoints {
				if strings.HasPrefix(e, "http://") {
					return nil, fmt.Errorf("--etcd-endpoints %s: plain http with TLS flags set; use https://", e)
				}
			}
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: endpoints, DialTimeout: s.Timeout, TLS: tlsCfg, Username: user, Password: password,
			Logger: log.Named("etcd-client").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
		})
		if err != nil {
			return nil, fmt.Errorf("connecting to etcd %s: %w", s.EtcdEndpoints, err)
		}
		store, err := dcsetcd.New(dcsetcd.Options{Client: cli, Prefix: s.EtcdPrefix, Cluster: s.Cluster,
			Member: s.Member, Instance: s.Instance, Logger: log.Named("dcs")})
		if err != nil {
			cli.Close()
			return nil, err
		}
		clusters := func(ctx context.Context) ([]string, error) { return dcsetcd.ClusterNames(ctx, cli, s.EtcdPrefix) }
		prefix := cmp.Or(s.EtcdPrefix, dcsetcd.DefaultPrefix)
		where := fmt.Sprintf("etcd at %s (prefix %s)", s.EtcdEndpoints, prefix)
		return &Conn{Store: store, Clusters: clusters, Where: where, close: func() { cli.Close() }}, nil
	case "kubernetes":
		cfg, err := s.restConfig()
		if err != nil {
			return nil, err
		}
		kube, err := kubeclient.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("building the Kubernetes client: %w", err)
		}
		store, err := dcskube.New(dcskube.Options{Leases: kube.Leases(s.Namespace), Namespace: s.Namespace,
			Cluster: s.Cluster, Member: s.Member, Instance: s.Instance, Logger: log.Named("dcs")})
		if err != nil {
			return nil, err
		}
		leases := kube.Leases(s.Namespace)
		clusters := func(ctx context.Context) ([]string, error) { return dcskube.ClusterNames(ctx, leases) }
		where := fmt.Sprintf("the Kubernetes API at %s (namespace %s)", cfg.Host, s.Namespace)
		return &Conn{Store: store, Kube: kube, Clusters: clusters, Where: where}, nil
	}
	return nil, fmt.Errorf("--dcs %q: want kubernetes or etcd", s.Kind)
}

func (s Settings) restConfig() (*rest.Config, error) {
	if s.RESTConfig != nil {
		return s.RESTConfig, nil
	}
	kubeconfig := s.Kubeconfig
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not running in a pod (%w); pass --kubeconfig or use --dcs=etcd", err)
	}
	return cfg, nil
}
