// Package cli is agentctl's command line, shared by bin/agentctl
// and the kubectl plugin bin/kubectl-mysqlha: a cobra command tree that
// follows kubectl's conventions (flags before or after the command, the
// kubeconfig's contexts and namespaces through k8s.io/cli-runtime, shell
// completion) and wires flags to package ctl, which holds the commands'
// logic and exit codes.
//
// Every failure is returned as an error that ctl.ExitCode maps to the exit
// status; a command line agentctl cannot parse (an unknown command or
// flag, a bad value, a wrong number of arguments) exits 2.
package cli

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

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/dcs/connect"
	dcsetcd "github.com/mysqlha/mysqlha/dcs/etcd"
)

// Names the command tree is run under.
const (
	Agentctl = "agentctl"
	// Plugin is the display name of bin/kubectl-mysqlha, which kubectl runs
	// for `kubectl mysqlha`.
	Plugin = "kubectl mysqlha"
)

// Deps is what the command tree reads and writes besides its arguments.
type Deps struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment (MYSQLHA_*, VISUAL, EDITOR).
	Getenv func(string) string
	// Open connects to the DCS; connect.Open when nil. Tests pass the
	// in-memory store.
	Open func(connect.Settings) (*connect.Conn, error)
}

// Main runs the command tree named name on the process's arguments and
// streams, prints a failure as "name: message" on stderr, and returns the
// exit status.
func Main(name string) int { return MainArgs(name, os.Args[1:]) }

// CompleteMain is the kubectl plugin's completion helper
// (kubectl_complete-mysqlha): kubectl runs it with the words typed after
// `kubectl mysqlha`, and it answers as cobra's hidden completion command.
func CompleteMain() int {
	return MainArgs(Plugin, append([]string{cobra.ShellCompRequestCmd}, os.Args[1:]...))
}

// MainArgs is Main with the arguments given.
func MainArgs(name string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, name, args, Deps{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	return ctl.ExitCode(err)
}

// Run executes args; ctl.ExitCode of the error is the exit status.
func Run(ctx context.Context, name string, args []string, d Deps) error {
	if d.Getenv == nil {
		d.Getenv = func(string) string { return "" }
	}
	if d.Open == nil {
		d.Open = func(s connect.Settings) (*connect.Conn, error) { return connect.Open(s, nopLogger()) }
	}
	a := newApp(name, d)
	root := a.rootCommand()
	root.SetArgs(args)
	_, err := root.ExecuteContextC(ctx)
	if err != nil && !a.ran {
		// cobra's own failures: an unknown command, flag or argument count.
		var e *ctl.Error
		if !errors.As(err, &e) {
			err = &ctl.Error{Code: ctl.ExitUsage, Msg: err.Error()}
		}
	}
	return err
}

// app is one run of the command tree: its flags' values, and whether a
// command's own logic ran (so that its errors keep their exit codes).
type app struct {
	name    string
	deps    Deps
	kube    *genericclioptions.ConfigFlags
	s       connect.Settings
	timeout time.Duration
	output  string
	ran     bool
	// conn and namespace are the last connection's, for the commands that
	// read Kubernetes beyond the DCS (report).
	conn      *connect.Conn
	namespace string
}

func newApp(name string, d Deps) *app {
	kube := genericclioptions.NewConfigFlags(true)
	// Our --cluster is the mysqlha cluster, not a kubeconfig cluster.
	kube.ClusterName = nil
	return &app{name: name, deps: d, kube: kube, s: connect.Settings{Member: "agentctl"}}
}

func (a *app) env(key, fallback string) string {
	if v := a.deps.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// rootCommand is the tree: the global flags, persistent so that they may
// come before or after the command, and one subcommand per operation.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           a.binary(),
		Short:         "operate a mysqlha cluster through its DCS",
		Long:          rootLong,
		Example:       a.examples(rootExamples),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the help, and a usage error.
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.printHelp(cmd)
			return usageErr("no command given")
		},
	}
	if a.name != a.binary() {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: a.name}
	}
	root.SetIn(a.deps.In)
	root.SetOut(a.deps.Out)
	root.SetErr(a.deps.Err)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { a.printHelp(cmd) })
	root.SetFlagErrorFunc(flagError)
	a.addGlobalFlags(root)
	root.AddCommand(a.commands()...)
	return root
}

// binary is the executable's name: kubectl finds a plugin by it.
func (a *app) binary() string {
	if a.name == Plugin {
		return "kubectl-mysqlha"
	}
	return a.name
}

func (a *app) addGlobalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&a.s.Kind, "dcs", a.env("MYSQLHA_DCS", "kubernetes"), "DCS backend: kubernetes or etcd (env MYSQLHA_DCS)")
	pf.StringVar(&a.s.Cluster, "cluster", a.env("MYSQLHA_CLUSTER", ""), "mysqlha cluster name, or the command's first argument (env MYSQLHA_CLUSTER)")
	pf.StringVar(&a.s.EtcdEndpoints, "etcd-endpoints", a.env("MYSQLHA_ETCD_ENDPOINTS", ""), "comma-separated etcd endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
	pf.StringVar(&a.s.EtcdPrefix, "etcd-prefix", dcsetcd.DefaultPrefix, "etcd key prefix")
	// The etcd TLS flags are defined once, for both binaries, on a Go
	// flag set; the agent does not link pflag for them.
	etcdFlags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	a.s.Etcd.RegisterFlags(etcdFlags)
	pf.AddGoFlagSet(etcdFlags)
	pf.DurationVar(&a.timeout, "timeout", 5*time.Second, "bound of each DCS read")
	pf.StringVarP(&a.output, "output", "o", "table", "output: table, wide (status: every column), json or yaml")
	a.kube.AddFlags(pf)
}
