package ctl

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// Store is the part of the DCS contract agentctl uses.
type Store interface {
	Cluster(ctx context.Context) (*dcs.Cluster, error)
	Changes() <-chan struct{}
	SetConfig(ctx context.Context, cfg dcs.Config, version string) error
	ChangeConfig(ctx context.Context, cfg dcs.Config, version string, e dcs.HistoryEntry) error
	RequestSwitchover(ctx context.Context, sw dcs.Switchover) error
	ClearSwitchover(ctx context.Context, version string) error
	DeleteMember(ctx context.Context, name string) error
	RequestReinit(ctx context.Context, r dcs.Reinit) error
	ClearReinit(ctx context.Context, version string) error
	RequestRestart(ctx context.Context, r dcs.Restart) error
	ClearRestart(ctx context.Context, version string) error
}

var _ Store = dcs.Store(nil)

// CLI runs agentctl's commands against one cluster.
type CLI struct {
	Store Store
	Out   io.Writer
	// Err receives the confirmation prompts, and the prose of a mutating
	// command whose Output is JSON or YAML.
	Err io.Writer
	In  io.Reader
	// Output is the format of a mutating command's result ("" is Table):
	// with JSON or YAML it prints one Result object on Out.
	Output Format
	// Poll is how often --wait and --watch re-read the DCS between change
	// notifications.
	Poll time.Duration
	// Timeout bounds each DCS read and write (--timeout); 0 for none. An
	// unreachable DCS then fails the command with ExitUnreachable instead
	// of blocking it forever.
	Timeout time.Duration
	// Editor opens a file in the operator's editor and returns once it was
	// saved and closed (edit-config); nil when none is configured.
	Editor func(path string) error
	// Clusters lists the clusters the DCS holds, for the failure of a
	// command that names one it does not; nil when it cannot be listed.
	Clusters func(ctx context.Context) ([]string, error)
	// Where names the DCS in the failure to read it ("the DCS" when "").
	Where string
}

// bounded is ctx limited to one DCS call.
func (c *CLI) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.Timeout)
}

// cluster reads the cluster, which must exist: a command that names a
// cluster nobody created (a typo) fails with ExitUnknownCluster and the
// names the DCS does hold, instead of acting on an empty snapshot.
func (c *CLI) cluster(ctx context.Context) (*dcs.Cluster, error) {
	cl, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	if !cl.Exists() {
		return nil, c.unknownCluster(ctx, cl.Name, "")
	}
	return cl, nil
}

// read is one bounded snapshot of the cluster, existing or not.
func (c *CLI) read(ctx context.Context) (*dcs.Cluster, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	cl, err := c.Store.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster from %s: %w", cmp.Or(c.Where, "the DCS"), err)
	}
	return cl, nil
}

// unknownCluster is the failure of a command naming a cluster the DCS has
// nothing of, listing the clusters it has; hint, when not "", is the way
// to go on regardless.
func (c *CLI) unknownCluster(ctx context.Context, name, hint string) error {
	found := "the DCS holds no cluster here (check --namespace, --etcd-prefix and the DCS)"
	if c.Clusters != nil {
		lctx, cancel := c.bounded(ctx)
		names, err := c.Clusters(lctx)
		cancel()
		switch {
		case err != nil:
			found = fmt.Sprintf("listing the clusters it holds failed: %v", err)
		case len(names) > 0:
			found = "clusters found: " + strings.Join(names, ", ")
		}
	}
	msg := fmt.Sprintf("no cluster %q in the DCS (no member record, leader lock or stored config); %s", name, found)
	if hint != "" {
		msg += "; " + hint
	}
	return fail(ExitUnknownCluster, "%s", msg)
}

// Format is an output format.
type Format string

const (
	Table Format = "table"
	// Wide is the table with every column, uncut (status; the other
	// commands print their table).
	Wide Format = "wide"
	JSON Format = "json"
	YAML Format = "yaml"
)

// ParseFormat validates -o.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Table, Wide, JSON, YAML:
		return f, nil
	}
	return "", fail(ExitUsage, "-o %q: want table, wide, json or yaml", s)
}

func (c *CLI) write(f Format, v any, table func(io.Writer)) error {
	switch f {
	case JSON:
		enc := json.NewEncoder(c.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = c.Out.Write(b)
		return err
	}
	table(c.Out)
	return nil
}

// Status prints the cluster; with watch it reprints on every change until
// ctx ends.
func (c *CLI) Status(ctx context.Context, f Format, watch bool) error {
	for {
		cl, err := c.cluster(ctx)
		if err != nil {
			return err
		}
		v := BuildStatus(cl)
		if watch && (f == Table || f == Wide) {
			fmt.Fprint(c.Out, "\033[H\033[2J")
			fmt.Fprintln(c.Out, time.Now().Format(time.RFC3339))
		}
		table := v.WriteTable
		if f == Wide {
			table = v.WriteWide
		}
		if err := c.write(f, v, table); err != nil {
			return err
		}
		if !watch {
			return nil
		}
		if !c.waitChange(ctx) {
			return nil
		}
	}
}

// waitChange blocks until the DCS changes or Poll passes; false when ctx ended.
func (c *CLI) waitChange(ctx context.Context) bool {
	t := time.NewTimer(c.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.Store.Changes():
	case <-t.C:
	}
	return true
}

// SwitchoverOptions are the flags of `agentctl switchover`.
type SwitchoverOptions struct {
	To string
	// AllowLag lets the leader stop writes for a target further behind
	// than failover.SwitchoverMaxBehind and wait for it to catch up.
	AllowLag bool
	Force    bool
	Wait     bool
	Timeout  time.Duration
	// At schedules the hand-over: the leader starts it at that time, not
	// before; zero is now.
	At time.Time
	// Cancel withdraws the pending request instead of making one.
	Cancel bool
}

// unknownMember is the failure for a member name without a record,
// listing the members.
func unknownMember(cl *dcs.Cluster, name string) error {
	names := make([]string, 0, len(cl.Members))
	for _, m := range cl.Members {
		names = append(names, m.Name)
	}
	return fail(ExitUnknownMember, "unknown member %q; members are: %s", name, strings.Join(names, ", "))
}

// candidate is the named member as failover judges it from its record
// and a pending reinit request, or an ExitUnknownMember error listing the members.
func candidate(cl *dcs.Cluster, name string) (failover.Member, error) {
	m, ok := cl.Member(name)
	if !ok {
		return failover.Member{}, unknownMember(cl, name)
	}
	fm := failover.FromRecord(m)
	fm.Rebuilding = fm.Rebuilding || cl.ReinitPending(name)
	fm.Restarting = fm.Restarting || cl.RestartPending(name)
	return fm, nil
}

func (c *CLI) confirm(question string) error {
	fmt.Fprintf(c.errOut(), "%s [y/N] ", question)
	line, _ := bufio.NewReader(c.In).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fail(ExitAborted, "aborted; nothing was changed")
	}
	return nil
}

// Switchover asks the leader for a planned, lossless hand-over.
func (c *CLI) Switchover(ctx context.Context, o SwitchoverOptions) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	if cl.Leader == nil || cl.Leader.Expired || cl.Leader.Err != nil {
		return fail(ExitNoLeader, "the cluster has no healthy leader to switch over from; use `agentctl failover --to MEMBER`")
	}
	if o.Cancel {
		return c.cancelSwitchover(ctx, cl)
	}
	leader := cl.Leader.Holder
	if cl.Config.Paused {
		return fail(ExitRejected, "the cluster is paused; run `agentctl resume` first")
	}
	if cl.Switchover != nil {
		return fail(ExitPending, "a switchover is already pending (%s); wait for it, or withdraw it with `agentctl switchover --cancel`",
			describeRequest(cl.Switchover))
	}
	if !o.At.IsZero() && !o.At.After(time.Now()) {
		return fail(ExitUsage, "--at %s is in the past", o.At.Format(time.RFC3339))
	}
	if o.To == leader {
		return fail(ExitRejected, "%s is already the leader", o.To)
	}
	if o.To != "" {
		m, err := candidate(cl, o.To)
		if err != nil {
			return err
		}
		if why := failover.Ineligibility(m, failover.RulesOf(cl.Config)); why != "" {
			return fail(ExitUnhealthy, "%s cannot take over: %s", o.To, why)
		}
	}
	target := orBest(o.To)
	when := ""
	if !o.At.IsZero() {
		when = " at " + o.At.Format(time.RFC3339)
	}
	if !o.Force {
		fmt.Fprintf(c.errOut(), "Plan: %s%s stops writes, waits until %s has every transaction, then hands it the lock.\n", leader, when, target)
		if o.AllowLag {
			fmt.Fprintf(c.errOut(), "With --allow-lag, writes may stay stopped for up to maximum_lag_on_failover while %s catches up.\n", target)
		}
		if err := c.confirm(fmt.Sprintf("Switch over from %s to %s?", leader, target)); err != nil {
			return err
		}
	}
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.RequestSwitchover(wctx, dcs.Switchover{From: leader, To: o.To, Force: o.AllowLag, ScheduledAt: o.At}); err != nil {
		if errors.Is(err, dcs.ErrExists) {
			return fail(ExitPending, "a switchover is already pending")
		}
		return fmt.Errorf("writing the switchover request: %w", err)
	}
	c.say("Switchover requested: %s -> %s%s\n", leader, target, when)
	r := Result{Command: "switchover", From: leader, To: o.To, Message: "switchover requested" + when}
	if o.Wait {
		// The wait's bound starts when the leader may act.
		timeout := o.Timeout + time.Until(o.At).Round(time.Second)
		if o.At.IsZero() {
			timeout = o.Timeout
		}
		if r.Primary, err = c.waitNewPrimary(ctx, leader, o.To, timeout, len(cl.History)); err != nil {
			return err
		}
		r.Message = r.Primary + " is the primary and accepts writes"
	}
	return c.finish(r)
}

// cancelSwitchover withdraws the pending switchover or failover request. A
// hand-over the leader has already begun is not undone: it finishes or
// fails as it would have.
func (c *CLI) cancelSwitchover(ctx context.Context, cl *dcs.Cluster) error {
	sw := cl.Switchover
	if sw == nil {
		return fail(ExitRejected, "no switchover or failover is pending; nothing to cancel")
	}
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.ClearSwitchover(wctx, sw.Version); err != nil {
		switch {
		case errors.Is(err, dcs.ErrConflict):
			return fail(ExitRejected, "the pending request changed meanwhile (replaced); see `agentctl status`")
		case errors.Is(err, dcs.ErrNotFound):
			return fail(ExitRejected, "the request is gone already (carried out, or refused by the leader); see `agentctl history`")
		}
		return fmt.Errorf("withdrawing the switchover request: %w", err)
	}
	c.say("Cancelled the pending switchover (%s).\n", describeRequest(sw))
	return c.finish(Result{Command: "switchover", From: sw.From, To: sw.To, Message: "switchover cancelled"})
}

// describeRequest says what a pending switchover or failover request asks.
func describeRequest(sw *dcs.Switchover) string {
	to := sw.To
	if to == "" {
		to = "the best replica"
	}
	s := "to " + to
	if sw.From != "" {
		s = "from " + sw.From + " " + s
	}
	if !sw.ScheduledAt.IsZero() {
		s += ", scheduled at " + sw.ScheduledAt.Format(time.RFC3339)
	}
	return s
}

// waitNewPrimary waits until a member other than old (or exactly want) holds
// the lock and reports itself primary, and returns its name. When old
// clears the request instead, it fails with the reason of old's
// switchover-rejected history entry among those after the first
// historyBefore (the history's length when the request was made).
func (c *CLI) waitNewPrimary(ctx context.Context, old, want string, timeout time.Duration, historyBefore int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	sawRequest := true
	for {
		cl, err := c.Store.Cluster(ctx)
		if err == nil {
			if l := cl.Leader; l != nil && !l.Expired && l.Holder != old && (want == "" || l.Holder == want) {
				if m, ok := cl.Member(l.Holder); ok && m.Role == dcs.RolePrimary {
					c.say("%s is the primary and accepts writes (after %s)\n", l.Holder, time.Since(start).Round(time.Millisecond))
					return l.Holder, nil
				}
			}
			if sawRequest && cl.Switchover == nil && cl.Leader != nil && cl.Leader.Holder == old {
				if why := rejection(cl.History, historyBefore, old); why != "" {
					return "", fail(ExitRejected, "the leader %s refused the switchover: %s", old, why)
				}
				return "", fail(ExitRejected, "the leader %s rejected or abandoned the switchover; see its log and Events", old)
			}
		}
		if !c.waitChange(ctx) {
			return "", fail(ExitTimeout, "timed out after %s waiting for the new primary", timeout)
		}
	}
}

// rejection is the reason of the newest switchover-rejected entry by leader
// among the history's entries after the first before; "" when there is
// none. The history is bounded (dcs.MaxHistory), so once full, entries
// shift: then every entry is searched, newest first, which at worst
// reports an older refusal's reason.
func rejection(history []dcs.HistoryEntry, before int, leader string) string {
	if before >= dcs.MaxHistory || before > len(history) {
		before = 0
	}
	for i := len(history) - 1; i >= before; i-- {
		if e := history[i]; e.Kind == dcs.HistorySwitchoverRejected && e.From == leader {
			return e.Reason
		}
	}
	return ""
}

// FailoverOptions are the flags of `agentctl failover`.
type FailoverOptions struct {
	To          string
	AllowLag    bool
	AllowErrant bool
	Force       bool
	Wait        bool
	Timeout     time.Duration
}

// Failover asks a named member to take over a cluster without a healthy
// leader.
func (c *CLI) Failover(ctx context.Context, o FailoverOptions) error {
	if o.To == "" {
		return fail(ExitUsage, "failover needs --to MEMBER")
	}
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	if cl.Leader != nil && !cl.Leader.Expired && cl.Leader.Err == nil {
		return fail(ExitRejected, "%s holds the lock and is healthy; use `agentctl switchover --to %s` for a lossless hand-over", cl.Leader.Holder, o.To)
	}
	if cl.Switchover != nil {
		return fail(ExitPending, "a switchover or failover is already pending (to %q)", cl.Switchover.To)
	}
	m, err := candidate(cl, o.To)
	if err != nil {
		return err
	}
	rules := failover.RulesOf(cl.Config)
	if o.AllowLag {
		rules = failover.Rules{} // lag, and a replica that did not acknowledge: both may lack transactions
	}
	if o.AllowErrant {
		m.Errant = false
	}
	if why := failover.Ineligibility(m, rules); why != "" {
		return fail(ExitUnhealthy, "%s cannot take over: %s (--allow-lag overrides the lag and acknowledgement checks, --allow-errant the errant one)", o.To, why)
	}
	if !o.Force {
		if err := c.confirm(fmt.Sprintf("Promote %s without a healthy leader? Transactions it lacks are lost.", o.To)); err != nil {
			return err
		}
	}
	sw := dcs.Switchover{To: o.To, Force: o.AllowLag || o.AllowErrant}
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.RequestSwitchover(wctx, sw); err != nil {
		if errors.Is(err, dcs.ErrExists) {
			return fail(ExitPending, "a switchover or failover is already pending")
		}
		return fmt.Errorf("writing the failover request: %w", err)
	}
	c.say("Failover to %s requested\n", o.To)
	r := Result{Command: "failover", To: o.To, Message: "failover requested"}
	if o.Wait {
		if r.Primary, err = c.waitNewPrimary(ctx, "", o.To, o.Timeout, 0); err != nil {
			return err
		}
		r.Message = r.Primary + " is the primary and accepts writes"
	}
	return c.finish(r)
}

// SetPaused switches maintenance mode; with wait it returns once a leader
// holds the lock again (after resume) or at once (after pause).
func (c *CLI) SetPaused(ctx context.Context, paused, wait bool, timeout time.Duration) error {
	for {
		cl, err := c.cluster(ctx)
		if err != nil {
			return err
		}
		cfg := cl.Config
		if cfg.Paused == paused {
			break
		}
		cfg.Paused = paused
		wctx, wcancel := c.bounded(ctx)
		err = c.Store.SetConfig(wctx, cfg, cl.ConfigVersion)
		wcancel()
		if errors.Is(err, dcs.ErrConflict) {
			continue // someone else changed the config; re-read and retry
		}
		if err != nil {
			return fmt.Errorf("writing the cluster config: %w", err)
		}
		break
	}
	r := Result{Command: "resume", Paused: &paused, Message: "automatic failover is on"}
	if paused {
		r.Command, r.Message = "pause", "no automatic failover or demotion until resume"
		c.say("Paused: no automatic failover or demotion until `agentctl resume`.\n")
		if wait {
			if err := c.waitAgentsPaused(ctx, timeout); err != nil {
				return err
			}
		}
		return c.finish(r)
	}
	c.say("Resumed: automatic failover is on.\n")
	if wait {
		var err error
		if r.Primary, err = c.waitNewPrimary(ctx, "", "", timeout, 0); err != nil {
			return err
		}
	}
	return c.finish(r)
}

// waitAgentsPaused waits until every member whose agent runs says, by its
// record, that it has seen the pause: from then on none fails over or
// demotes. A member whose record is stale or whose agent stopped is not
// waited for, and is named.
func (c *CLI) waitAgentsPaused(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	for {
		var waiting, skipped []string
		cl, err := c.Store.Cluster(ctx)
		if err == nil {
			for _, m := range cl.Members {
				switch {
				case m.Stale || m.Tags[failover.TagStopped] != "":
					skipped = append(skipped, m.Name)
				case m.Tags[failover.TagPaused] == "":
					waiting = append(waiting, m.Name)
				}
			}
			if len(waiting) == 0 {
				c.say("Every running agent has seen the pause (after %s).\n", time.Since(start).Round(time.Millisecond))
				if len(skipped) > 0 {
					c.say("Not running, so not waited for: %s; they read the pause when they start.\n", strings.Join(skipped, ", "))
				}
				return nil
			}
		}
		if !c.waitChange(ctx) {
			if len(waiting) == 0 {
				return fail(ExitTimeout, "timed out after %s reading the cluster: %v", timeout, err)
			}
			return fail(ExitTimeout, "timed out after %s: the agents of %s have not shown the pause "+
				"(agents older than pause --wait never do; see `agentctl version`)", timeout, strings.Join(waiting, ", "))
		}
	}
}

// HistoryRow is one entry of `agentctl history`, also as JSON or YAML: the
// kind by name and lower-case keys, like StatusView.
type HistoryRow struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	// WriteUnavailable is how long writes were refused, when recorded.
	WriteUnavailable string `json:"write_unavailable,omitempty"`
}

// History prints the failovers, switchovers and config changes, oldest
// first.
func (c *CLI) History(ctx context.Context, f Format) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	rows := make([]HistoryRow, 0, len(cl.History))
	for _, e := range cl.History {
		r := HistoryRow{At: e.At, Kind: e.KindString(), From: e.From, To: e.To, Reason: e.Reason}
		if e.WriteUnavailable > 0 {
			r.WriteUnavailable = e.WriteUnavailable.String()
		}
		rows = append(rows, r)
	}
	return c.write(f, rows, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tKIND\tFROM\tTO\tREASON")
		for _, e := range cl.History {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339), e.KindString(), orDash(e.From), orDash(e.To), e.Reason)
		}
		tw.Flush()
	})
}

// orDash shows an empty table cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
