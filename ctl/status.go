package ctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// StatusView is what `agentctl status` shows, also as JSON or YAML.
type StatusView struct {
	Cluster string `json:"cluster"`
	Leader  string `json:"leader"`
	// LockExpiresIn is the time until others may take the lock as judged on
	// this machine's clock; empty where the backend binds the lock to a
	// server-side lease (etcd).
	LockExpiresIn string          `json:"lock_expires_in,omitempty"`
	LockTTL       string          `json:"lock_ttl,omitempty"`
	Paused        bool            `json:"paused"`
	Switchover    *dcs.Switchover `json:"pending_switchover,omitempty"`
	Members       []MemberRow     `json:"members"`
	Problems      []string        `json:"problems,omitempty"`
}

// MemberRow is one member in the status table.
type MemberRow struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
	// LagSeconds is the replica's delay; nil when unknown. While its
	// receiver does not receive it grows with the time since it last did
	// (while a leader lives), so a stale 0 never shows.
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// Receiver is the state of the replica's receiver (IO thread): running,
	// connecting (retrying an unreachable source) or stopped; empty when
	// not a replica, or from an agent older than the field.
	Receiver string `json:"receiver,omitempty"`
	// LagTransactions counts the leader's transactions this member lacks,
	// from the last published records; nil when it cannot be computed.
	LagTransactions *uint64 `json:"lag_transactions,omitempty"`
	GTID            string  `json:"gtid"`
	Tags            string  `json:"tags,omitempty"`
	// AgentVersion is the version of the member's agent; empty for an
	// agent older than the field.
	AgentVersion string `json:"agent_version,omitempty"`
	// MySQLAddr and APIURL are where peers reach the member's mysqld and
	// agent; UpdatedAt is when its agent last wrote the record (its clock).
	MySQLAddr string    `json:"mysql_addr,omitempty"`
	APIURL    string    `json:"api_url,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// BuildStatus turns a snapshot into the status view.
func BuildStatus(cl *dcs.Cluster) StatusView {
	v := StatusView{Cluster: cl.Name, Paused: cl.Config.Paused}
	if sw := cl.Switchover; sw != nil && sw.Err == nil {
		v.Switchover = sw
	}
	var leader *dcs.Member
	if l := cl.Leader; l != nil {
		v.Leader = l.Holder
		if l.Expired {
			v.Leader += " (expired)"
		}
		v.LockTTL = l.TTL.String()
		if !l.RenewedAt.IsZero() && !l.ObservedAt.IsZero() {
			v.LockExpiresIn = max(l.ObservedAt.Add(l.TTL).Sub(cl.ReadAt), 0).Round(100 * time.Millisecond).String()
		}
		if m, ok := cl.Member(l.Holder); ok {
			leader = &m
		}
	}
	for _, m := range cl.Members {
		row := MemberRow{Name: m.Name, Role: m.Role.String(), State: memberState(m), GTID: m.GTIDExecuted, AgentVersion: m.AgentVersion,
			Receiver: m.Receiver.String(), MySQLAddr: m.MySQLAddr, APIURL: m.APIURL, UpdatedAt: m.UpdatedAt}
		if m.Role == dcs.RolePrimary && (cl.Leader == nil || cl.Leader.Holder != m.Name || cl.Leader.Expired) {
			// A record can outlive its agent by the member TTL.
			row.State = "not the lock holder (stale record?)"
		}
		if m.Lag != nil {
			s := m.Lag.Seconds()
			row.LagSeconds = &s
		}
		if leader != nil {
			if n, ok := lacks(m.GTIDExecuted, leader.GTIDExecuted); ok {
				row.LagTransactions = &n
			}
		}
		var tags []string
		if cl.Config.IsFenced(m.Name) {
			tags = append(tags, "FENCED (agentctl unfence lifts it)")
		}
		if m.NoFailover {
			tags = append(tags, "nofailover")
		}
		if m.FailoverPriority != 0 {
			tags = append(tags, fmt.Sprintf("priority=%d", m.FailoverPriority))
		}
		if why := m.Tags[failover.TagStalled]; why != "" {
			tags = append(tags, "stalled: "+why)
		}
		if m.Tags[failover.TagLagging] != "" {
			tags = append(tags, "lagging")
		}
		if m.Tags[failover.TagAsync] != "" {
			tags = append(tags, "async")
		}
		if why := m.Tags[failover.TagMisconfigured]; why != "" {
			tags = append(tags, "misconfigured: "+why)
		}
		if why := m.Tags[failover.TagNoReads]; why != "" {
			tags = append(tags, "noreads: "+why)
		}
		row.Tags = strings.Join(tags, ",")
		v.Members = append(v.Members, row)
	}
	for _, p := range cl.Problems {
		v.Problems = append(v.Problems, p.Error())
	}
	return v
}

func memberState(m dcs.Member) string {
	switch {
	case m.Stale:
		return "stale"
	case m.Tags[failover.TagRebuilding] != "":
		return "rebuilding " + m.Tags[failover.TagRebuilding] // "from <donor>"
	case m.Tags[failover.TagRestarting] != "":
		return "restarting " + m.Tags[failover.TagRestarting] // "since <time>"
	case m.Tags[failover.TagErrant] != "":
		return "errant"
	case m.Replication == dcs.ReplicationBroken:
		return "broken: " + m.ReplicationError
	case m.Replication == dcs.ReplicationRunning:
		return "streaming"
	case m.Replication == dcs.ReplicationNone && m.Role == dcs.RolePrimary:
		return "running"
	case m.Replication == dcs.ReplicationStopped && m.Receiver != dcs.ReceiverUnknown:
		// Connecting: cut from its source; running: only the applier stopped.
		return "stopped (receiver " + m.Receiver.String() + ")"
	}
	return m.Replication.String()
}

// lacks counts the transactions of leader that member lacks. The flavor is
// told by the text: MySQL sets contain "uuid:", MariaDB positions do not.
func lacks(member, leader string) (uint64, bool) {
	if strings.Contains(member+leader, ":") {
		m, err1 := gtid.ParseSet(member)
		l, err2 := gtid.ParseSet(leader)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return l.Subtract(m).Count(), true
	}
	m, err1 := gtid.ParseMariaDBPos(member)
	l, err2 := gtid.ParseMariaDBPos(leader)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return m.Behind(l), true
}

// WriteTable prints the view like `patronictl list`.
func (v StatusView) WriteTable(w io.Writer) { v.writeTable(w, false) }

// WriteWide is WriteTable with where each member is reached, its agent's
// version and its record's age, and no cell cut: -o wide.
func (v StatusView) WriteWide(w io.Writer) { v.writeTable(w, true) }

func (v StatusView) writeTable(w io.Writer, wide bool) {
	leader := v.Leader
	if leader == "" {
		leader = "none"
	}
	lock := ""
	switch {
	case v.LockExpiresIn != "":
		lock = fmt.Sprintf(" (lock expires in %s unless renewed)", v.LockExpiresIn)
	case v.LockTTL != "":
		lock = fmt.Sprintf(" (lock ttl %s, server-side lease)", v.LockTTL)
	}
	fmt.Fprintf(w, "Cluster: %s   Leader: %s%s\n", v.Cluster, leader, lock)
	paused := "no"
	if v.Paused {
		paused = "YES (maintenance mode: no automatic failover)"
	}
	pending := "none"
	if sw := v.Switchover; sw != nil {
		pending = fmt.Sprintf("%s, requested %s", describeRequest(sw), sw.RequestedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "Paused: %s   Pending switchover: %s\n", paused, pending)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "MEMBER\tROLE\tSTATE\tLAG(s)\tLAG(tx)\tGTID\tMYSQL\tAPI\tVERSION\tUPDATED\tTAGS")
	} else {
		fmt.Fprintln(tw, "MEMBER\tROLE\tSTATE\tLAG(s)\tLAG(tx)\tGTID\tTAGS")
	}
	cutAny := false
	for _, m := range v.Members {
		lagS, lagT := "-", "-"
		if m.LagSeconds != nil {
			lagS = fmt.Sprintf("%.0f", *m.LagSeconds)
		}
		if m.LagTransactions != nil {
			lagT = fmt.Sprint(*m.LagTransactions)
		}
		if wide {
			updated, version := "-", m.AgentVersion
			if !m.UpdatedAt.IsZero() {
				updated = m.UpdatedAt.UTC().Format(time.RFC3339)
			}
			if version == "" {
				version = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Role, m.State, lagS, lagT, m.GTID,
				m.MySQLAddr, m.APIURL, version, updated, m.Tags)
			continue
		}
		state, tags := cut(m.State), cut(m.Tags)
		if state != m.State || tags != m.Tags {
			cutAny = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Role, state, lagS, lagT, m.GTID, tags)
	}
	tw.Flush()
	if cutAny {
		fmt.Fprintln(w, "(cut to fit: `agentctl describe MEMBER` or -o json shows it whole)")
	}
	for _, p := range v.Problems {
		fmt.Fprintf(w, "warning: %s\n", p)
	}
}

// cellWidth bounds the free-text cells of the status table (a replication
// error, a stalled primary's reason), so a row fits a terminal.
const cellWidth = 48

// cut shortens s to cellWidth runes, ending in "...".
func cut(s string) string {
	r := []rune(s)
	if len(r) <= cellWidth {
		return s
	}
	return string(r[:cellWidth-3]) + "..."
}
