package kubernetes_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	k8sdcs "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

const (
	ttl           = 5 * time.Second
	memberTTL     = 30 * time.Second
	memberRefresh = 10 * time.Second
)

var clusterSeq atomic.Int64

func newCluster() string { return fmt.Sprintf("c%d", clusterSeq.Add(1)) }

func fakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

func clientset(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newStore(t testing.TB, cfg *rest.Config, ns, cluster, member string, clk *clocktesting.FakeClock) *k8sdcs.Store {
	t.Helper()
	s, err := k8sdcs.New(k8sdcs.Options{
		Leases: clientset(t, cfg).CoordinationV1().Leases(ns), Namespace: ns, Cluster: cluster, Member: member,
		Clock: clk, MemberTTL: memberTTL, MemberRefresh: memberRefresh,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// closedPortConfig points at a loopback port nobody listens on.
func closedPortConfig(t testing.TB) *rest.Config {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return &rest.Config{Host: "https://" + addr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// factory builds contract environments in namespace ns with cfg's
// credentials.
func factory(cfg *rest.Config, ns string) dcstest.Factory { return factoryAs(cfg, cfg, ns) }

// factoryAs builds contract environments in namespace ns whose members
// have cfg's credentials and whose remover (agentctl) has operator's.
func factoryAs(cfg, operator *rest.Config, ns string) dcstest.Factory {
	return func(t *testing.T, n int) *dcstest.Env {
		cluster := newCluster()
		e := &dcstest.Env{TTL: ttl, MemberTTL: memberTTL, MemberRefresh: memberRefresh}
		var clocks []*clocktesting.FakeClock
		for i := 0; i < n; i++ {
			c := fakeClock()
			clocks = append(clocks, c)
			e.Stores = append(e.Stores, newStore(t, cfg, ns, cluster, fmt.Sprintf("m%d", i), c))
		}
		e.Advance = func(d time.Duration) {
			for _, c := range clocks {
				c.Step(d)
			}
		}
		e.AdvanceMember = func(i int, d time.Duration) { clocks[i].Step(d) }
		e.Twin = func(i int) dcs.Store {
			c := fakeClock()
			clocks = append(clocks, c)
			return newStore(t, cfg, ns, cluster, fmt.Sprintf("m%d", i), c)
		}
		e.Unreachable = func() dcs.Store { return newStore(t, closedPortConfig(t), ns, cluster, "unreachable", fakeClock()) }
		e.Remover = func() dcs.Store {
			c := fakeClock()
			clocks = append(clocks, c)
			return newStore(t, operator, ns, cluster, "remover", c)
		}
		return e
	}
}

// TestNewRejectsBadInstance: Options.Instance is checked before anything
// else happens; an empty one is drawn at random. No API server needed.
func TestNewRejectsBadInstance(t *testing.T) {
	leases := clientset(t, closedPortConfig(t)).CoordinationV1().Leases("ns")
	for _, inst := range []string{"UPPER", "a/b", "a b", "a_b", strings.Repeat("a", dcs.MaxInstanceLen+1)} {
		_, err := k8sdcs.New(k8sdcs.Options{Leases: leases, Namespace: "ns", Cluster: "c", Member: "m0", Instance: inst})
		if !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), "leave Instance empty") {
			t.Errorf("New with instance %q: %v, want ErrInvalid naming the fix", inst, err)
		}
	}
	s, err := k8sdcs.New(k8sdcs.Options{Leases: leases, Namespace: "ns", Cluster: "c", Member: "m0", Instance: "given-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Instance() != "given-1" {
		t.Fatalf("Instance() = %q, want the given one", s.Instance())
	}
	r, err := k8sdcs.New(k8sdcs.Options{Leases: leases, Namespace: "ns", Cluster: "c", Member: "m0"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Instance()) != 16 || dcs.ValidateInstance(r.Instance()) != nil {
		t.Fatalf("drawn Instance() = %q, want 16 hex characters", r.Instance())
	}
}

// TestKubernetes shares one kube-apiserver (a few seconds to start) among
// the contract suite and the bad-input cases.
func TestKubernetes(t *testing.T) {
	api := kubetest.Start(t)
	api.CreateNamespace(t, "dcs")
	t.Run("Contract", func(t *testing.T) { dcstest.Run(t, factory(api.Config(), "dcs")) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, api) })
}
