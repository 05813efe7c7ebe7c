package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pollInterval is how often --wait and --watch re-read the DCS between
// change notifications.
const pollInterval = time.Second

const rootLong = `Operates a mysqlha cluster through its DCS only (a kubeconfig context or the
in-cluster config, or etcd endpoints), so it needs no network path to the
database pods. Flags may come before or after the command; the cluster is
--cluster, the command's first argument, or $MYSQLHA_CLUSTER.`

const rootExamples = `agentctl --cluster=demo --namespace=db status
agentctl status demo -n db --context=prod
agentctl --dcs=etcd --etcd-endpoints=http://127.0.0.1:2379 --cluster=demo status -o json --watch
agentctl --cluster=demo switchover --to=demo-2 --wait
agentctl switchover demo --to demo-2 --force -o json
agentctl --cluster=demo failover --to=demo-1 --force
agentctl --cluster=demo pause
agentctl --cluster=demo resume --wait
agentctl --cluster=demo history -o yaml
agentctl --cluster=demo set-config ttl=10s loop_wait=2s
agentctl describe demo demo-1
agentctl --cluster=demo remove demo-3
agentctl completion bash > /etc/bash_completion.d/agentctl`

const exitCodes = `Exit codes: 0 ok, 1 error, 2 usage, 3 unknown member, 4 unhealthy target, 5 no leader,
6 request already pending, 7 timeout, 8 DCS unreachable or forbidden, 9 rejected, 10 aborted,
11 unknown cluster.`

// examples names the binary as it is run in every example line.
func (a *app) examples(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "  " + strings.Replace(l, Agentctl, a.name, 1)
	}
	return strings.Join(lines, "\n")
}

// printHelp writes cmd's help to stderr, as agentctl always has, so that
// stdout carries only a command's output (and completion scripts).
// printHelp prints cmd's help on stdout, as kubectl does, so that
// `agentctl --help | less` works; errors and prompts stay on stderr.
func (a *app) printHelp(cmd *cobra.Command) {
	w := a.deps.Out
	if !cmd.HasParent() {
		fmt.Fprintf(w, "Usage: %s COMMAND [CLUSTER] [ARGS] [flags]\n\n%s\n\nCommands:\n", a.name, cmd.Long)
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-12s %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintf(w, "\nExamples:\n%s\n\n%s\n\nGlobal flags:\n%s", cmd.Example, exitCodes, cmd.PersistentFlags().FlagUsages())
		return
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", cmd.UseLine(), firstNonEmpty(cmd.Long, cmd.Short))
	if cmd.Example != "" {
		fmt.Fprintf(w, "\nExample:\n%s\n", cmd.Example)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\nCommands:")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-12s %s\n", sub.Name(), sub.Short)
			}
		}
	}
	fmt.Fprintf(w, "\nFlags:\n%s", cmd.LocalNonPersistentFlags().FlagUsages())
	fmt.Fprintf(w, "\nGlobal flags (%s --help lists them all): --cluster, --dcs, -n/--namespace, --context, --kubeconfig, "+
		"--etcd-endpoints, -o/--output, --timeout\n", a.name)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// flagError makes a flag that cannot be parsed a usage error (exit 2),
// worded as Go's flag package words it, which scripts and agentctl's
// earlier versions rely on.
func flagError(_ *cobra.Command, err error) error {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &notExist):
		return usageErr("flag provided but not defined: -%s", notExist.GetSpecifiedName())
	case errors.As(err, &invalid):
		return usageErr("invalid value %q for flag --%s: %v", invalid.GetValue(), invalid.GetFlag().Name, errors.Unwrap(invalid))
	}
	return usageErr("%v", err)
}
