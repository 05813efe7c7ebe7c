package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/internal/version"
)

// argShape is what a command's arguments are besides the optional cluster
// name in front: none, one member, or key=value assignments.
type argShape int

const (
	clusterOnly argShape = iota
	clusterMember
	clusterAssignments
)

// waitFlags are the flags of the commands that may wait for a primary.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command, withWait bool) { w.addFor(cmd, withWait, time.Minute) }

// addFor is add with the default of --wait-timeout.
func (w *waitFlags) addFor(cmd *cobra.Command, withWait bool, timeout time.Duration) {
	if withWait {
		cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until the new primary accepts writes")
	}
	cmd.Flags().DurationVar(&w.timeout, "wait-timeout", timeout, "how long --wait waits")
}

// command is a subcommand whose run gets the connected CLI and the
// arguments left once the cluster name was taken off.
func (a *app) command(use, short, example string, shape argShape, run func(context.Context, *ctl.CLI, []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Example: a.examples(example),
		Args: cobra.ArbitraryArgs, ValidArgsFunction: a.completeArgs(shape),
		RunE: func(cmd *cobra.Command, args []string) error {
			rest, err := a.takeCluster(cmd, args, shape)
			if err != nil {
				return err
			}
			c, closeConn, err := a.connect()
			if err != nil {
				return err
			}
			defer closeConn()
			a.ran = true
			return run(cmd.Context(), c, rest)
		},
	}
}

func (a *app) commands() []*cobra.Command {
	return []*cobra.Command{a.statusCommand(), a.switchoverCommand(), a.failoverCommand(),
		a.pauseCommand(), a.resumeCommand(), a.historyCommand(), a.showConfigCommand(), a.setConfigCommand(),
		a.editConfigCommand(), a.describeCommand(), a.removeCommand(), a.reinitCommand(), a.restartCommand(), a.versionCommand(), a.reportCommand(),
		a.fenceCommand(true), a.fenceCommand(false)}
}

func (a *app) statusCommand() *cobra.Command {
	var watch bool
	cmd := a.command("status [CLUSTER]", "show members, roles, lag, GTIDs, the lock holder and pending requests",
		"agentctl --cluster=demo status [-o table|wide|json|yaml] [--watch]\nagentctl status demo -o wide", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			if watch {
				return c.Status(ctx, c.Output, true)
			}
			ctx, cancel := a.readContext(ctx)
			defer cancel()
			return c.Status(ctx, c.Output, false)
		})
	cmd.Flags().BoolVar(&watch, "watch", false, "reprint on every change until interrupted")
	return cmd
}

func (a *app) switchoverCommand() *cobra.Command {
	var o ctl.SwitchoverOptions
	var w waitFlags
	var at string
	cmd := a.command("switchover [CLUSTER]", "planned, lossless hand-over to another member",
		"agentctl --cluster=demo switchover [--to=MEMBER] [--at=TIME] [--allow-lag] [--force] [--wait]\n"+
			"agentctl switchover demo --to demo-1\nagentctl switchover demo --at=2026-12-07T03:00:00Z --force\n"+
			"agentctl switchover demo --cancel", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			o.Wait, o.Timeout = w.wait, w.timeout
			if at != "" {
				if o.Cancel {
					return usageErr("--at and --cancel do not go together")
				}
				t, err := parseAt(at, time.Now())
				if err != nil {
					return err
				}
				o.At = t
			}
			return c.Switchover(ctx, o)
		})
	cmd.Flags().StringVar(&o.To, "to", "", "target member (default: the best replica)")
	cmd.RegisterFlagCompletionFunc("to", a.completeMember)
	cmd.Flags().StringVar(&at, "at", "", "schedule it: a time (RFC 3339, 2026-12-07T03:00:00Z) or a delay from now (90m); the leader starts it then")
	cmd.Flags().BoolVar(&o.Cancel, "cancel", false, "withdraw the pending (or scheduled) switchover or failover request instead")
	cmd.Flags().BoolVar(&o.AllowLag, "allow-lag", false, "hand over to a target far behind, waiting for it with writes stopped")
	cmd.Flags().BoolVar(&o.Force, "force", false, "do not ask for confirmation")
	w.add(cmd, true)
	return cmd
}

func (a *app) failoverCommand() *cobra.Command {
	var o ctl.FailoverOptions
	var w waitFlags
	cmd := a.command("failover [CLUSTER]", "promote a member when there is no healthy leader",
		"agentctl --cluster=demo failover --to=MEMBER [--allow-lag] [--allow-errant] [--force] [--wait]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			o.Wait, o.Timeout = w.wait, w.timeout
			return c.Failover(ctx, o)
		})
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "the member to promote (required)")
	cmd.RegisterFlagCompletionFunc("to", a.completeMember)
	f.BoolVar(&o.AllowLag, "allow-lag", false, "allow a target beyond maximum_lag_on_failover, or one that did not acknowledge writes (semi_sync strict)")
	f.BoolVar(&o.AllowErrant, "allow-errant", false, "allow a target with errant transactions (they become the truth)")
	f.BoolVar(&o.Force, "force", false, "do not ask for confirmation")
	w.add(cmd, true)
	return cmd
}

func (a *app) pauseCommand() *cobra.Command {
	var w waitFlags
	cmd := a.command("pause [CLUSTER]", "maintenance mode: no automatic failover or demotion",
		"agentctl --cluster=demo pause [--wait]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			return c.SetPaused(ctx, true, w.wait, w.timeout)
		})
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until every running agent has seen the pause")
	w.addFor(cmd, false, time.Minute)
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	var w waitFlags
	cmd := a.command("resume [CLUSTER]", "leave maintenance mode",
		"agentctl --cluster=demo resume [--wait]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			return c.SetPaused(ctx, false, w.wait, w.timeout)
		})
	w.add(cmd, true)
	return cmd
}

func (a *app) historyCommand() *cobra.Command {
	return a.command("history [CLUSTER]", "past failovers, switchovers and config changes",
		"agentctl --cluster=demo history [-o table|json|yaml]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			ctx, cancel := a.readContext(ctx)
			defer cancel()
			return c.History(ctx, c.Output)
		})
}

func (a *app) showConfigCommand() *cobra.Command {
	return a.command("show-config [CLUSTER]", "the cluster config every agent follows",
		"agentctl --cluster=demo show-config [-o table|json|yaml]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			ctx, cancel := a.readContext(ctx)
			defer cancel()
			return c.ShowConfig(ctx, c.Output)
		})
}

const createUsage = "store the config of a cluster that does not exist yet (its agents' bootstrap flags then lose to it)"

func (a *app) setConfigCommand() *cobra.Command {
	var create bool
	cmd := a.command("set-config [CLUSTER] KEY=VALUE...", "change cluster config settings; the agents apply them without a restart",
		"agentctl --cluster=demo set-config KEY=VALUE [KEY=VALUE ...]   # e.g. ttl=10s loop_wait=2s semi_sync=on", clusterAssignments,
		func(ctx context.Context, c *ctl.CLI, args []string) error { return c.SetConfig(ctx, args, create) })
	cmd.Flags().BoolVar(&create, "create", false, createUsage)
	return cmd
}

func (a *app) editConfigCommand() *cobra.Command {
	var force, create bool
	cmd := a.command("edit-config [CLUSTER]", "change the cluster config in $VISUAL or $EDITOR",
		"agentctl --cluster=demo edit-config [--force]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error { return c.EditConfig(ctx, force, create) })
	cmd.Flags().BoolVar(&force, "force", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&create, "create", false, createUsage)
	return cmd
}

func (a *app) describeCommand() *cobra.Command {
	return a.command("describe [CLUSTER] MEMBER", "one member's whole record: GTIDs, replication error, agent version",
		"agentctl --cluster=demo describe MEMBER [-o table|json|yaml]\nagentctl describe demo demo-1", clusterMember,
		func(ctx context.Context, c *ctl.CLI, args []string) error {
			ctx, cancel := a.readContext(ctx)
			defer cancel()
			return c.Describe(ctx, c.Output, args[0])
		})
}

func (a *app) removeCommand() *cobra.Command {
	var w waitFlags
	cmd := a.command("remove [CLUSTER] MEMBER", "delete the record of a member that is gone (scaled down)",
		"agentctl --cluster=demo remove MEMBER [--wait-timeout=60s]", clusterMember,
		func(ctx context.Context, c *ctl.CLI, args []string) error { return c.Remove(ctx, args[0], w.timeout) })
	w.add(cmd, false)
	cmd.Flags().Lookup("wait-timeout").Usage = "how long to watch a member that may be live"
	return cmd
}

func (a *app) fenceCommand(on bool) *cobra.Command {
	var o ctl.FenceOptions
	use, short, example := "fence [CLUSTER] MEMBER", "keep a member read-only and out of every election until unfenced",
		"agentctl --cluster=demo fence MEMBER [--force]"
	if !on {
		use, short, example = "unfence [CLUSTER] MEMBER", "lift agentctl fence: the member may lead again", "agentctl --cluster=demo unfence MEMBER"
	}
	cmd := a.command(use, short, example, clusterMember,
		func(ctx context.Context, c *ctl.CLI, args []string) error {
			o.Member = args[0]
			return c.SetFenced(ctx, on, o)
		})
	if on {
		cmd.Flags().BoolVar(&o.Force, "force", false, "fence the leader too: it gives up the lock, and another member takes over")
	}
	return cmd
}

func (a *app) reinitCommand() *cobra.Command {
	var w waitFlags
	o := ctl.ReinitOptions{}
	cmd := a.command("reinit [CLUSTER] MEMBER", "rebuild a member's data from a donor's backup (an errant member, or one whose binary logs were purged)",
		"agentctl --cluster=demo reinit MEMBER [--from=DONOR] [--force] [--wait]\nagentctl --cluster=demo reinit MEMBER --cancel", clusterMember,
		func(ctx context.Context, c *ctl.CLI, args []string) error {
			o.Member, o.Wait, o.Timeout = args[0], w.wait, w.timeout
			return c.Reinit(ctx, o)
		})
	cmd.Flags().StringVar(&o.From, "from", "", "the donor (default: the streaming replica with the least lag, else the leader)")
	cmd.RegisterFlagCompletionFunc("from", a.completeMember)
	cmd.Flags().BoolVar(&o.Force, "force", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.Cancel, "cancel", false, "withdraw the pending request for MEMBER instead")
	w.addFor(cmd, true, 10*time.Minute) // a backup's copy takes minutes per 10 GB
	cmd.Flags().Lookup("wait").Usage = "wait until the member is rebuilt and streams from the leader"
	return cmd
}

func (a *app) restartCommand() *cobra.Command {
	var w waitFlags
	o := ctl.RestartOptions{}
	cmd := a.command("restart [CLUSTER] MEMBER", "restart a member's mysqld safely: a replica at once, the leader after a switchover",
		"agentctl --cluster=demo restart MEMBER [--to=NEW_LEADER] [--force] [--wait]\nagentctl --cluster=demo restart MEMBER --cancel", clusterMember,
		func(ctx context.Context, c *ctl.CLI, args []string) error {
			o.Member, o.Wait, o.Timeout = args[0], w.wait, w.timeout
			return c.Restart(ctx, o)
		})
	cmd.Flags().StringVar(&o.To, "to", "", "when MEMBER leads: the member that takes over first (default: the leader's best replica)")
	cmd.RegisterFlagCompletionFunc("to", a.completeMember)
	cmd.Flags().BoolVar(&o.Force, "force", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.Cancel, "cancel", false, "withdraw the pending request for MEMBER instead")
	w.addFor(cmd, true, 5*time.Minute) // a large buffer pool takes a while to flush and to warm
	cmd.Flags().Lookup("wait-timeout").Usage = "how long the switchover first (when MEMBER leads), and --wait, may take"
	cmd.Flags().Lookup("wait").Usage = "wait until the member's mysqld is back and streams from the leader"
	return cmd
}

// versionCommand prints agentctl's version and, when the DCS can be read,
// every member's agent version; an unreachable DCS is said, not failed.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use: "version [CLUSTER]", Short: "agentctl's version and every member's agent version",
		Example: a.examples("agentctl --cluster=demo version [-o table|json|yaml]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := a.takeCluster(cmd, args, clusterOnly); err != nil {
				return err
			}
			f, err := ctl.ParseFormat(a.output)
			if err != nil {
				return err
			}
			c, closeConn, unreachable := a.connectForVersion()
			defer closeConn()
			a.ran = true
			ctx, cancel := a.readContext(cmd.Context())
			defer cancel()
			return c.Version(ctx, f, version.Get(), unreachable)
		},
	}
}

// readContext bounds a one-shot read by --timeout.
func (a *app) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// parseAt reads switchover --at: an RFC 3339 time, or a delay from now.
func parseAt(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	return time.Time{}, usageErr("--at %q: give a time (RFC 3339, e.g. %s) or a delay from now (e.g. 90m)",
		s, now.Add(time.Hour).UTC().Truncate(time.Minute).Format(time.RFC3339))
}
