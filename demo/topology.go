package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// statuses reads every member's GET /status; nil entries did not answer.
func (d *demo) statuses(ctx context.Context, ms []*member) []*memberStatus {
	out := make([]*memberStatus, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = m.status(ctx) }()
	}
	wg.Wait()
	return out
}

// topology returns the primary when exactly one member of ms is the
// writable lock holder and every other member replicates from it.
func (d *demo) topology(ctx context.Context, ms []*member) (*member, []*memberStatus) {
	sts := d.statuses(ctx, ms)
	var primary *member
	for i, st := range sts {
		if st.isPrimary() {
			if primary != nil {
				return nil, sts
			}
			primary = ms[i]
		}
	}
	if primary == nil {
		return nil, sts
	}
	for i, st := range sts {
		if ms[i] != primary && !st.replicates(primary.addr()) {
			return nil, sts
		}
	}
	return primary, sts
}

// describe summarises statuses for an error message.
func describe(ms []*member, sts []*memberStatus) string {
	var b strings.Builder
	for i, st := range sts {
		if st == nil {
			fmt.Fprintf(&b, "\n  %s: agent API %s does not answer", ms[i].name, ms[i].apiURL)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: role=%s holds_lock=%v writable=%v replication=%s source=%q leader=%q action=%s reason=%q error=%q",
			ms[i].name, st.Role, st.HoldsLock, st.Writable, st.Replication, st.Source, st.Leader, st.Action, st.Reason, st.Error)
	}
	return b.String()
}

// bootstrap waits until the agents have elected a primary that every other
// member replicates from, and returns it.
func (d *demo) bootstrap(ctx context.Context) (*member, error) {
	d.p.start("waiting for the agents to elect a primary and set up replication")
	deadline := time.Now().Add(bootstrapTimeout)
	for {
		primary, sts := d.topology(ctx, d.members)
		if primary != nil {
			var replicas []*member
			for _, m := range d.members {
				if m != primary {
					replicas = append(replicas, m)
				}
			}
			d.p.done("%s is primary; %s %s from it", primary.name, names(replicas), verb(len(replicas), "replicates", "replicate"))
			return primary, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no primary with %d streaming replicas after %v; the agents report:%s",
				len(d.members)-1, bootstrapTimeout, describe(d.members, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
}

// settleRecords waits until the member records in the DCS, which agentctl
// shows and which members republish at most every dcs.DefaultMemberRefresh,
// carry the primary's current GTID, so that the status printed next is
// current rather than a snapshot from before the last writes. Not reaching
// that is not an error: the status is then shown as it is.
func (d *demo) settleRecords(ctx context.Context, primary *member) error {
	d.p.start("waiting for the members' DCS records to show the latest GTID (republished at most every %v)", dcs.DefaultMemberRefresh)
	deadline := time.Now().Add(dcs.DefaultMemberRefresh + 5*time.Second)
	for {
		st := primary.status(ctx)
		var view struct {
			Leader  string `json:"leader"`
			Members []struct {
				Name string `json:"name"`
				Role string `json:"role"`
				GTID string `json:"gtid"`
			} `json:"members"`
		}
		out, err := d.agentctlOutput(ctx, "status", "-o", "json")
		if err == nil && st != nil && json.Unmarshal(out, &view) == nil && view.Leader == primary.name &&
			len(view.Members) == len(d.members) {
			current := true
			for _, m := range view.Members {
				wantRole := "replica"
				if m.Name == primary.name {
					wantRole = "primary"
				}
				current = current && m.GTID == st.GTID && m.Role == wantRole
			}
			if current {
				d.p.done("every record shows %s", st.GTID)
				return nil
			}
		}
		if time.Now().After(deadline) {
			d.p.done("not all yet; showing them as they are")
			return nil
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}
