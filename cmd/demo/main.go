// Command mysqlha-demo runs a local 3-member MariaDB cluster managed by
// mysqlha agents on an embedded etcd (or, with --k8s, on a local
// kube-apiserver), shows it with agentctl, runs a failover drill, and keeps
// the cluster running until Ctrl-C or `mysqlha-demo --stop`. With --ci it
// checks every step and stops. It only wires flags to package demo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/demo"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mysqlha-demo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	exe, _ := os.Executable()
	cfg := demo.Config{Out: os.Stdout}
	fs := flag.NewFlagSet("mysqlha-demo", flag.ContinueOnError)
	fs.StringVar(&cfg.Dir, "dir", "/tmp/mysqlha-demo", "work dir (data, sockets, logs, pid file); removed at exit")
	fs.StringVar(&cfg.BinDir, "bin", filepath.Dir(exe), "directory holding mysqlha-agent and agentctl")
	fs.StringVar(&cfg.Cluster, "cluster", "demo", "cluster name")
	fs.BoolVar(&cfg.CI, "ci", false, "non-interactive: check bootstrap, failover drill and rejoin, then stop everything")
	k8s := fs.Bool("k8s", false, "use a local kube-apiserver (Leases, pod labels, Services) instead of the embedded etcd")
	kubeBin := "k8s-" + kubetest.KubernetesVersion
	fs.StringVar(&cfg.KubeBinDir, "kube-bin", "", "directory holding kube-apiserver and kube-controller-manager (default: $KUBE_BIN_DIR, else <bin>/"+kubeBin+")")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work dir (logs) at exit")
	fs.IntVar(&cfg.EtcdPort, "etcd-port", 2379, "etcd client port (0: any free port)")
	fs.IntVar(&cfg.MySQLPort, "mysql-port", 3307, "first member's MariaDB port; the others use the next ones (0: free ports)")
	fs.IntVar(&cfg.APIPort, "api-port", 8008, "first member's agent API port; the others use the next ones (0: free ports)")
	stop := fs.Bool("stop", false, "stop the demo running in --dir and wait until it has cleaned up")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: mysqlha-demo [flags]

Starts a local 3-member MariaDB cluster managed by mysqlha agents, shows it
with agentctl, runs a failover drill, and keeps it running until Ctrl-C or
mysqlha-demo --stop (make demo, make demo-stop, make demo-ci, make demo-k8s).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *stop {
		return demo.Stop(cfg.Dir, os.Stdout, 2*time.Minute)
	}
	if *k8s {
		cfg.Backend = demo.BackendKubernetes
	}
	if cfg.KubeBinDir == "" {
		cfg.KubeBinDir = os.Getenv("KUBE_BIN_DIR")
	}
	if cfg.KubeBinDir == "" {
		cfg.KubeBinDir = filepath.Join(cfg.BinDir, kubeBin)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	return demo.Run(ctx, cfg)
}
