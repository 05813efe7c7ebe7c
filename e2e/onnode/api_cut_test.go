package onnode

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary is cut off from the API server only (the kubernetes
// Service's ClusterIP and the apiserver's own address), for 20 s. It still
// reaches its peers, and they it. It cannot renew, so it demotes itself
// before the deadline; a replica takes over after ttl, catching up from the
// old primary first, so nothing is lost. Failsafe mode, the deployment's
// default, keeps it instead (TestFailsafePrimaryCutFromAPIServer): this is
// the rule it relaxes, so it is off here.
func TestPrimaryCutFromAPIServer(t *testing.T) {
	withoutFailsafe(t, func() {
		primaryCutFromAPIServer("the primary cut off from the API server only, without failsafe").run(t)
	})
}

func primaryCutFromAPIServer(name string) scenario {
	return scenario{
		name:   name,
		leader: otherLeader,
		hold:   20 * time.Second,
		inject: func(tr *trial) error {
			ns, err := tr.netns(tr.primary)
			if err != nil {
				return err
			}
			addrs, err := apiServerAddrs(tr.c)
			if err != nil {
				return err
			}
			_, err = tr.faults.CutFrom(ns, addrs...)
			return err
		},
		expect: checker.Expect{MaxOutage: 20 * time.Second},
	}
}

// apiServerAddrs: where a pod reaches the API server, the kubernetes
// Service (ClusterIP:443) and the apiserver's address behind it.
func apiServerAddrs(c *cluster) ([]string, error) {
	svc, err := c.client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.node.APIServer().URL())
	if err != nil {
		return nil, err
	}
	return []string{net.JoinHostPort(svc.Spec.ClusterIP, "443"), u.Host}, nil
}
