package demo

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// drill kills the primary's mysqld and agent, as a dying pod would, and
// follows the survivors live until another member holds the lock, accepts
// a write, the others replicate from it and (Kubernetes) its Service routes
// to it. It returns the new primary.
func (d *demo) drill(ctx context.Context, old *member) (*member, error) {
	var survivors []*member
	for _, m := range d.members {
		if m != old {
			survivors = append(survivors, m)
		}
	}
	mysqldPid, agentPid := old.server.Pid(), old.agentPid()
	d.p.start("drill: kill -9 the primary %s: its mysqld (pid %d) and its agent (pid %d)", old.name, mysqldPid, agentPid)
	killed := time.Now()
	old.stopAgent(syscall.SIGKILL, 10*time.Second)
	old.server.Kill()
	d.p.done("killed")

	d.p.note("drill: waiting for %s to take over (the lock expires after ttl %v; the best replica takes it and promotes itself)",
		names(survivors), dcs.DefaultTTL)
	var (
		lockAt, writeAt, settledAt time.Duration
		writer, holder             *member
		last                       string
		deadline                   = killed.Add(failoverTimeout)
	)
	for {
		primary, sts := d.topology(ctx, survivors)
		var parts []string
		for i, st := range sts {
			parts = append(parts, survivors[i].name+" "+st.short())
			if st != nil && st.HoldsLock && holder == nil {
				holder, lockAt = survivors[i], time.Since(killed)
			}
		}
		line := strings.Join(parts, ", ")
		if extra := d.be.live(ctx); extra != "" {
			line += " " + extra
		}
		if line != last {
			d.p.detail("+%-5s %s", seconds(time.Since(killed)), line)
			last = line
		}
		if writer == nil {
			// Try a write on every survivor: the first that takes one is
			// the new primary as the application sees it.
			for _, m := range survivors {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := m.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES (?, @@hostname)",
					"first write after the failover, on "+m.name)
				cancel()
				if err == nil {
					writer, writeAt = m, time.Since(killed)
					d.p.detail("+%-5s %s accepted a write", seconds(writeAt), writer.name)
					if holder == nil {
						holder, lockAt = writer, writeAt
					}
					if holder != writer {
						return nil, fmt.Errorf("split brain: %s accepted a write but %s was seen holding the lock", writer.name, holder.name)
					}
					break
				}
			}
		}
		if writer != nil && primary != nil && primary != writer {
			return nil, fmt.Errorf("%s accepted the write but %s is the primary", writer.name, primary.name)
		}
		if writer != nil && primary == writer && d.be.routed(ctx, writer.name) {
			settledAt = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			what := "no survivor accepted a write"
			if writer != nil {
				what = fmt.Sprintf("%s accepted a write, but the others do not all replicate from it or it is not routed to", writer.name)
			}
			return nil, fmt.Errorf("%s within %v of the kill; the agents report:%s", what, failoverTimeout, describe(survivors, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
	var others []*member
	for _, m := range survivors {
		if m != writer {
			others = append(others, m)
		}
	}
	d.p.note("drill: %s took the lock %s after the kill and accepted a write after %s; %s %s from it after %s%s",
		writer.name, seconds(lockAt), seconds(writeAt), names(others), verb(len(others), "replicates", "replicate"),
		seconds(settledAt), d.be.routedNote())
	d.p.start("checking the rows on %s", names(survivors))
	if err := d.waitRows(ctx, survivors, 2, 30*time.Second); err != nil {
		return nil, err
	}
	d.p.done("both rows everywhere: the one written on %s before the drill, and the one on %s after it", old.name, writer.name)
	return writer, nil
}

// rejoin restarts the old primary's mysqld and agent and waits until it
// replicates from the new primary and has every row.
func (d *demo) rejoin(ctx context.Context, old, primary *member) error {
	d.p.start("restarting %s's mysqld and agent (the pod comes back)", old.name)
	if err := old.server.Start(); err != nil {
		return fmt.Errorf("restarting %s's mysqld: %w", old.name, err)
	}
	d.track(old.server.Pid(), "mariadbd "+old.name+" (restarted)")
	pid, err := old.startAgent()
	if err != nil {
		return err
	}
	d.track(pid, "mysqlha-agent "+old.name+" (restarted)")
	d.p.done("mysqld pid %d, agent pid %d", old.server.Pid(), pid)

	d.p.start("waiting for %s to rejoin as a replica of %s", old.name, primary.name)
	deadline := time.Now().Add(rejoinTimeout)
	for {
		p, sts := d.topology(ctx, d.members)
		if p == primary {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not rejoin within %v; the agents report:%s", old.name, rejoinTimeout, describe(d.members, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	if err := d.waitRows(ctx, []*member{old}, 2, 30*time.Second); err != nil {
		return err
	}
	d.p.done("%s replicates from %s and has the row written after the failover", old.name, primary.name)
	return nil
}
