// Command agentctl is the operator's tool for a mysqlha cluster: status,
// switchover, failover, pause, resume, history, the cluster config
// (show-config, set-config, edit-config) and remove. It talks only to the DCS
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

const usage = `Usage: agentctl [global flags] COMMAND [flags] [arguments]

Commands:
  status       show members, roles, lag, GTIDs, the lock holder and pending requests
  switchover   planned, lossless hand-over to another member
  failover     promote a member when there is no healthy leader
  pause        maintenance mode: no automatic failover or demotion
  resume       leave maintenance mode
  history      past failovers, switchovers and config changes
  show-config  the cluster config every agent follows
  set-config   change cluster config settings; the agents apply them without a restart
  edit-config  change the cluster config in $VISUAL or $EDITOR
  remove       delete the record of a member that is gone (scaled down)

Examples:
  agentctl --cluster=demo --namespace=db status
  agentctl --dcs=etcd --etcd-endpoints=http://127.0.0.1:2379 --cluster=demo status -o json --watch
  agentctl --cluster=demo switchover --to=demo-2 --wait
  agentctl --cluster=demo failover --to=demo-1 --force
  agentctl --cluster=demo pause
  agentctl --cluster=demo resume --wait
  agentctl --cluster=demo history -o yaml
  agentctl --cluster=demo set-config ttl=10s loop_wait=2s
  agentctl --cluster=demo remove demo-3

Exit codes: 0 ok, 1 error, 2 usage, 3 unknown member, 4 unhealthy target, 5 no leader,
6 request already pending, 7 timeout, 8 DCS unreachable or forbidden, 9 rejected, 10 aborted.

Global flags:
`

// command is one of agentctl's commands: its usage example and the
// arguments it takes besides flags.
type command struct {
	example string
	// args names the arguments for errors ("" for none); minArgs and
	// maxArgs bound their number (maxArgs < 0: no bound).
	args             string
	minArgs, maxArgs int
}

var commands = map[string]command{
	"status":      {example: "agentctl --cluster=demo status [-o table|json|yaml] [--watch]"},
	"switchover":  {example: "agentctl --cluster=demo switchover [--to=MEMBER] [--force] [--wait]"},
	"failover":    {example: "agentctl --cluster=demo failover --to=MEMBER [--allow-lag] [--allow-errant] [--force] [--wait]"},
	"pause":       {example: "agentctl --cluster=demo pause"},
	"resume":      {example: "agentctl --cluster=demo resume [--wait]"},
	"history":     {example: "agentctl --cluster=demo history [-o table|json|yaml]"},
	"show-config": {example: "agentctl --cluster=demo show-config [-o table|json|yaml]"},
	"set-config": {example: "agentctl --cluster=demo set-config KEY=VALUE [KEY=VALUE ...]   # e.g. ttl=10s loop_wait=2s semi_sync=on",
		args: "KEY=VALUE", minArgs: 1, maxArgs: -1},
	"edit-config": {example: "agentctl --cluster=demo edit-config [--force]"},
	"remove": {example: "agentctl --cluster=demo remove MEMBER [--wait-timeout=60s]",
		args: "MEMBER", minArgs: 1, maxArgs: 1},
}

// options are the command flags.
type options struct {
	format                string
	watch, force, wait    bool
	to                    string
	waitFor               time.Duration
	allowLag, allowErrant bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "o", "table", "output: table, json or yaml")
	fs.BoolVar(&o.watch, "watch", false, "status: reprint on every change until interrupted")
	fs.StringVar(&o.to, "to", "", "switchover: target member (default: best replica); failover: required")
	fs.BoolVar(&o.force, "force", false, "do not ask for confirmation")
	fs.BoolVar(&o.wait, "wait", false, "wait until the new primary accepts writes")
	fs.DurationVar(&o.waitFor, "wait-timeout", 60*time.Second, "how long --wait waits; remove: how long it watches a member that may be live")
	fs.BoolVar(&o.allowLag, "allow-lag", false, "failover: allow a target beyond maximum_lag_on_failover, or one that did not acknowledge writes (semi_sync strict)")
	fs.BoolVar(&o.allowErrant, "allow-errant", false, "failover: allow a target with errant transactions (they become the truth)")
}

// parseArgs parses the command's flags, which may come before, between or
// after its arguments, and checks the number of arguments.
func parseArgs(fs *flag.FlagSet, cmd command, rest []string) ([]string, error) {
	var args []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		args, rest = append(args, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(args) > 0 && cmd.args == "":
		return nil, usageErr("unexpected arguments %q", args)
	case len(args) < cmd.minArgs:
		return nil, usageErr("missing %s; example: %s", cmd.args, cmd.example)
	case cmd.maxArgs >= 0 && len(args) > cmd.maxArgs:
		return nil, usageErr("unexpected arguments %q after %s", args[cmd.maxArgs:], cmd.args)
	}
	return args, nil
}

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
	name, rest := global.Arg(0), global.Args()[1:]
	cmd, ok := commands[name]
	if !ok {
		global.Usage()
		return usageErr("unknown command %q", name)
	}
	fs := flag.NewFlagSet("agentctl "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o options
	o.register(fs)
	fs.Usage = func() { fmt.Fprintf(errOut, "Example:\n  %s\n\nFlags:\n", cmd.example); fs.PrintDefaults() }
	args, err := parseArgs(fs, cmd, rest)
	if err != nil {
		return err
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
	f, err := ctl.ParseFormat(o.format)
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
	if editor := env("VISUAL", os.Getenv("EDITOR")); editor != "" {
		c.Editor = ctl.ShellEditor(editor, in, out, errOut)
	}
	return dispatch(ctx, c, name, o, f, args, *timeout)
}

// dispatch runs command name; timeout bounds the one-shot reads.
func dispatch(ctx context.Context, c *ctl.CLI, name string, o options, f ctl.Format, args []string, timeout time.Duration) error {
	readCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }
	switch name {
	case "status":
		if o.watch {
			return c.Status(ctx, f, true)
		}
		rctx, cancel := readCtx()
		defer cancel()
		return c.Status(rctx, f, false)
	case "switchover":
		return c.Switchover(ctx, ctl.SwitchoverOptions{To: o.to, Force: o.force, Wait: o.wait, Timeout: o.waitFor})
	case "failover":
		return c.Failover(ctx, ctl.FailoverOptions{To: o.to, AllowLag: o.allowLag, AllowErrant: o.allowErrant, Force: o.force, Wait: o.wait, Timeout: o.waitFor})
	case "pause":
		return c.SetPaused(ctx, true, false, o.waitFor)
	case "resume":
		return c.SetPaused(ctx, false, o.wait, o.waitFor)
	case "history":
		rctx, cancel := readCtx()
		defer cancel()
		return c.History(rctx, f)
	case "show-config":
		rctx, cancel := readCtx()
		defer cancel()
		return c.ShowConfig(rctx, f)
	case "set-config":
		return c.SetConfig(ctx, args)
	case "edit-config":
		return c.EditConfig(ctx, o.force)
	case "remove":
		return c.Remove(ctx, args[0], o.waitFor)
	}
	return nil
}
