// Command agentctl is the operator's tool for a mysqlha cluster: status,
// switchover, failover, pause, resume and history. It talks only to the DCS
// (kubeconfig or in-cluster, or etcd endpoints), so it needs no network path
// to the database pods. It only wires flags to package ctl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/dcs/connect"
	dcsetcd "github.com/mysqlha/mysqlha/dcs/etcd"
)

const usage = `Usage: agentctl [global flags] COMMAND [flags]

Commands:
  status      show members, roles, lag, GTIDs, the lock holder and pending requests
  switchover  planned, lossless hand-over to another member
  failover    promote a member when there is no healthy leader
  pause       maintenance mode: no automatic failover or demotion
  resume      leave maintenance mode
  history     past failovers and switchovers

Examples:
  agentctl --cluster=demo --namespace=db status
  agentctl --dcs=etcd --etcd-endpoints=http://127.0.0.1:2379 --cluster=demo status -o json --watch
  agentctl --cluster=demo switchover --to=demo-2 --wait
  agentctl --cluster=demo failover --to=demo-1 --force
  agentctl --cluster=demo pause
  agentctl --cluster=demo resume --wait
  agentctl --cluster=demo history -o yaml

Exit codes: 0 ok, 1 error, 2 usage, 3 unknown member, 4 unhealthy target, 5 no leader,
6 request already pending, 7 timeout, 8 DCS unreachable or forbidden, 9 rejected, 10 aborted.

Global flags:
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "agentctl:", err)
	}
	if errors.Is(err, flag.ErrHelp) {
		err = nil
	}
	os.Exit(ctl.ExitCode(err))
}

func env(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func usageErr(format string, args ...any) error {
	return &ctl.Error{Code: ctl.ExitUsage, Msg: fmt.Sprintf(format, args...)}
}

func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	s := connect.Settings{Member: "agentctl"}
	global := flag.NewFlagSet("agentctl", flag.ContinueOnError)
	global.SetOutput(errOut)
	global.StringVar(&s.Kind, "dcs", env("MYSQLHA_DCS", "kubernetes"), "DCS backend: kubernetes or etcd (env MYSQLHA_DCS)")
	global.StringVar(&s.Cluster, "cluster", env("MYSQLHA_CLUSTER", ""), "cluster name (env MYSQLHA_CLUSTER)")
	global.StringVar(&s.Namespace, "namespace", env("POD_NAMESPACE", "default"), "Kubernetes namespace (env POD_NAMESPACE)")
	global.StringVar(&s.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig file; in-cluster config when empty")
	global.StringVar(&s.EtcdEndpoints, "etcd-endpoints", env("MYSQLHA_ETCD_ENDPOINTS", ""), "comma-separated etcd endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
	global.StringVar(&s.EtcdPrefix, "etcd-prefix", dcsetcd.DefaultPrefix, "etcd key prefix")
	s.Etcd.RegisterFlags(global)
	timeout := global.Duration("timeout", 5*time.Second, "bound of each DCS read")
	global.Usage = func() { fmt.Fprint(errOut, usage); global.PrintDefaults() }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	if global.NArg() == 0 {
		global.Usage()
		return usageErr("no command given")
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	fs := flag.NewFlagSet("agentctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(errOut)
	var (
		format  = fs.String("o", "table", "output: table, json or yaml")
		watch   = fs.Bool("watch", false, "status: reprint on every change until interrupted")
		to      = fs.String("to", "", "switchover: target member (default: best replica); failover: required")
		force   = fs.Bool("force", false, "do not ask for confirmation")
		wait    = fs.Bool("wait", false, "wait until the new primary accepts writes")
		waitFor = fs.Duration("wait-timeout", 60*time.Second, "how long --wait waits")
		lag     = fs.Bool("allow-lag", false, "failover: allow a target beyond maximum_lag_on_failover, or one that did not acknowledge writes (semi_sync strict)")
		errant  = fs.Bool("allow-errant", false, "failover: allow a target with errant transactions (they become the truth)")
	)
	examples := map[string]string{
		"status":     "agentctl --cluster=demo status [-o table|json|yaml] [--watch]",
		"switchover": "agentctl --cluster=demo switchover [--to=MEMBER] [--force] [--wait]",
		"failover":   "agentctl --cluster=demo failover --to=MEMBER [--allow-lag] [--allow-errant] [--force] [--wait]",
		"pause":      "agentctl --cluster=demo pause",
		"resume":     "agentctl --cluster=demo resume [--wait]",
		"history":    "agentctl --cluster=demo history [-o table|json|yaml]",
	}
	example, ok := examples[cmd]
	if !ok {
		global.Usage()
		return usageErr("unknown command %q", cmd)
	}
	fs.Usage = func() { fmt.Fprintf(errOut, "Example:\n  %s\n\nFlags:\n", example); fs.PrintDefaults() }
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	// Checked after the command's flags, so that `agentctl CMD --help`
	// works without any configuration.
	if s.Cluster == "" {
		return usageErr("--cluster is required (env MYSQLHA_CLUSTER)")
	}
	switch s.Kind {
	case "kubernetes":
	case "etcd":
		if s.EtcdEndpoints == "" {
			return usageErr("--dcs=etcd needs --etcd-endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
		}
	default:
		return usageErr("--dcs %q: want kubernetes or etcd", s.Kind)
	}
	f, err := ctl.ParseFormat(*format)
	if err != nil {
		return err
	}

	s.Timeout = *timeout
	conn, err := connect.Open(s, zap.NewNop())
	if err != nil {
		return &ctl.Error{Code: ctl.ExitUnreachable, Msg: err.Error()}
	}
	defer conn.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := &ctl.CLI{Store: conn.Store, Out: out, In: in, Poll: time.Second, Timeout: *timeout}
	readCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, *timeout) }
	switch cmd {
	case "status":
		if *watch {
			return c.Status(ctx, f, true)
		}
		rctx, cancel := readCtx()
		defer cancel()
		return c.Status(rctx, f, false)
	case "switchover":
		return c.Switchover(ctx, ctl.SwitchoverOptions{To: *to, Force: *force, Wait: *wait, Timeout: *waitFor})
	case "failover":
		return c.Failover(ctx, ctl.FailoverOptions{To: *to, AllowLag: *lag, AllowErrant: *errant, Force: *force, Wait: *wait, Timeout: *waitFor})
	case "pause":
		return c.SetPaused(ctx, true, false, *waitFor)
	case "resume":
		return c.SetPaused(ctx, false, *wait, *waitFor)
	case "history":
		rctx, cancel := readCtx()
		defer cancel()
		return c.History(rctx, f)
	}
	return nil
}
