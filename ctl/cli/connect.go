package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/dcs/connect"
)

func usageErr(format string, args ...any) error {
	return &ctl.Error{Code: ctl.ExitUsage, Msg: fmt.Sprintf(format, args...)}
}

func nopLogger() *zap.Logger { return zap.NewNop() }

// takeCluster takes the cluster name off the front of args when it is
// given there, checks it against --cluster, and checks the number of the
// arguments left for shape.
func (a *app) takeCluster(cmd *cobra.Command, args []string, shape argShape) ([]string, error) {
	positional, rest := splitCluster(args, shape)
	if len(rest) > 0 && shape == clusterOnly {
		return nil, usageErr("unexpected arguments %q; example: %s", rest, firstLine(cmd.Example))
	}
	if shape == clusterMember && len(rest) != 1 {
		return nil, usageErr("want MEMBER, or CLUSTER MEMBER; example: %s", firstLine(cmd.Example))
	}
	if positional == "" {
		return rest, nil
	}
	// An explicit --cluster that names another cluster is a mistake; the
	// environment's MYSQLHA_CLUSTER is only a default, which the argument
	// overrides (as --namespace does $KUBECONFIG's namespace).
	if cmd.Flags().Changed("cluster") && a.s.Cluster != positional {
		return nil, usageErr("unexpected arguments [%q]: --cluster=%s already names the cluster; give it once", positional, a.s.Cluster)
	}
	a.s.Cluster = positional
	return rest, nil
}

// splitCluster returns the cluster name that args start with ("" when
// none) and the arguments after it.
func splitCluster(args []string, shape argShape) (string, []string) {
	switch {
	case len(args) == 0:
		return "", args
	case shape == clusterMember && len(args) < 2:
		return "", args
	case shape == clusterAssignments && strings.Contains(args[0], "="):
		return "", args
	}
	return args[0], args[1:]
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// settings checks the global flags and resolves the Kubernetes client
// config and namespace kubectl's way.
func (a *app) settings() (connect.Settings, error) {
	s := a.s
	if s.Cluster == "" {
		return s, usageErr("--cluster is required (or the command's first argument; env MYSQLHA_CLUSTER)")
	}
	switch s.Kind {
	case "kubernetes":
	case "etcd":
		if s.EtcdEndpoints == "" {
			return s, usageErr("--dcs=etcd needs --etcd-endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
		}
		return s, nil
	default:
		return s, usageErr("--dcs %q: want kubernetes or etcd", s.Kind)
	}
	cfg, err := a.restConfig()
	if err != nil {
		return s, err
	}
	ns, _, err := a.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return s, kubeConfigErr(err)
	}
	s.RESTConfig, s.Namespace = cfg, ns
	return s, nil
}

// restConfig is the client config kubectl would use, except that with no
// kubeconfig at all it is the in-cluster config or an error: kubectl's
// last resort, http://localhost:8080, is never a mysqlha DCS.
func (a *app) restConfig() (*rest.Config, error) {
	raw, err := a.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, kubeConfigErr(err)
	}
	if len(raw.Clusters) > 0 || (a.kube.APIServer != nil && *a.kube.APIServer != "") {
		cfg, err := a.kube.ToRESTConfig()
		if err != nil {
			return nil, kubeConfigErr(err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, &ctl.Error{Code: ctl.ExitUnreachable, Msg: fmt.Sprintf("no kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config) "+
			"and not running in a pod (%v); pass --kubeconfig or use --dcs=etcd", err)}
	}
	return cfg, nil
}

// kubeConfigErr: a kubeconfig that cannot be loaded fails as an
// unreachable DCS (8), as it did before contexts were supported.
func kubeConfigErr(err error) error {
	return &ctl.Error{Code: ctl.ExitUnreachable, Msg: fmt.Sprintf("loading the Kubernetes client config: %v", err)}
}

// connect opens the DCS and the CLI on it; closeConn releases both.
func (a *app) connect() (c *ctl.CLI, closeConn func(), err error) {
	f, err := ctl.ParseFormat(a.output)
	if err != nil {
		return nil, nil, err
	}
	s, err := a.settings()
	if err != nil {
		return nil, nil, err
	}
	s.Timeout = a.timeout
	conn, err := a.deps.Open(s)
	if err != nil {
		return nil, nil, &ctl.Error{Code: ctl.ExitUnreachable, Msg: err.Error()}
	}
	a.conn, a.namespace = conn, s.Namespace
	c = &ctl.CLI{Store: conn.Store, Out: a.deps.Out, Err: a.deps.Err, In: a.deps.In, Output: f,
		Poll: pollInterval, Timeout: a.timeout, Clusters: conn.Clusters, Where: conn.Where}
	if editor := a.env("VISUAL", a.deps.Getenv("EDITOR")); editor != "" {
		c.Editor = ctl.ShellEditor(editor, a.deps.In, a.deps.Out, a.deps.Err)
	}
	return c, func() { closeWithin(conn.Close, closeWait) }, nil
}

// closeWait bounds how long a command waits for the DCS client to stop: a
// request to an API server that refused the connection sleeps out
// client-go's retry delay (a second, which no context interrupts) before
// it ends, and the command's answer is already known.
const closeWait = 100 * time.Millisecond

// closeWithin runs stop, returning when it has returned or after d,
// whichever is first; a stop still running ends on its own.
func closeWithin(stop func(), d time.Duration) {
	done := make(chan struct{})
	go func() { defer close(done); stop() }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// connectForVersion is connect for `version`, which prints without a DCS:
// the CLI always, and why the DCS cannot be read when it cannot.
func (a *app) connectForVersion() (c *ctl.CLI, closeConn func(), unreachable error) {
	c, closeConn, err := a.connect()
	if err != nil {
		return &ctl.CLI{Out: a.deps.Out, Err: a.deps.Err, Timeout: a.timeout}, func() {}, err
	}
	return c, closeConn, nil
}
