package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// MemberDetail is what `agentctl describe MEMBER` shows: the member's whole
// record, nothing cut.
type MemberDetail struct {
	MemberRow
	LockHolder       bool              `json:"lock_holder"`
	Instance         string            `json:"instance"`
	APIURL           string            `json:"api_url"`
	MySQLAddr        string            `json:"mysql_addr"`
	GTIDRetrieved    string            `json:"gtid_retrieved,omitempty"`
	Replication      string            `json:"replication"`
	ReplicationError string            `json:"replication_error,omitempty"`
	NoFailover       bool              `json:"nofailover"`
	FailoverPriority int               `json:"failover_priority"`
	Labels           map[string]string `json:"labels,omitempty"`
	UpdatedAt        time.Time         `json:"updated_at"`
	Stale            bool              `json:"stale"`
}

// Describe prints one member in full: a long replication error or GTID
// set that the status table cuts is whole here.
func (c *CLI) Describe(ctx context.Context, f Format, name string) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	d, err := describeMember(cl, name)
	if err != nil {
		return err
	}
	return c.write(f, d, d.WriteTable)
}

func describeMember(cl *dcs.Cluster, name string) (MemberDetail, error) {
	m, ok := cl.Member(name)
	if !ok {
		names := make([]string, 0, len(cl.Members))
		for _, x := range cl.Members {
			names = append(names, x.Name)
		}
		return MemberDetail{}, fail(ExitUnknownMember, "unknown member %q; members are: %s", name, strings.Join(names, ", "))
	}
	i := slices.IndexFunc(cl.Members, func(x dcs.Member) bool { return x.Name == name })
	return MemberDetail{
		MemberRow:  BuildStatus(cl).Members[i],
		LockHolder: cl.Leader != nil && cl.Leader.Holder == name && !cl.Leader.Expired,
		Instance:   m.Instance, APIURL: m.APIURL, MySQLAddr: m.MySQLAddr, GTIDRetrieved: m.GTIDRetrieved,
		Replication: m.Replication.String(), ReplicationError: m.ReplicationError,
		NoFailover: m.NoFailover, FailoverPriority: m.FailoverPriority, Labels: m.Tags,
		UpdatedAt: m.UpdatedAt, Stale: m.Stale,
	}, nil
}

// WriteTable prints the detail as "key: value" lines.
func (d MemberDetail) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	line("Member", d.Name)
	line("Role", d.Role)
	line("Lock holder", d.LockHolder)
	line("State", d.State)
	line("Replication", d.Replication)
	if d.Receiver != "" {
		line("Receiver", d.Receiver)
	}
	if d.ReplicationError != "" {
		line("Replication error", d.ReplicationError)
	}
	if d.LagSeconds != nil {
		line("Lag (s)", fmt.Sprintf("%.0f", *d.LagSeconds))
	}
	if d.LagTransactions != nil {
		line("Lag (transactions)", *d.LagTransactions)
	}
	line("GTID executed", d.GTID)
	if d.GTIDRetrieved != "" {
		line("GTID retrieved", d.GTIDRetrieved)
	}
	line("MySQL address", d.MySQLAddr)
	line("API URL", d.APIURL)
	line("Agent instance", d.Instance)
	line("Agent version", agentVersion(d.AgentVersion))
	line("No failover", d.NoFailover)
	line("Failover priority", d.FailoverPriority)
	if d.Tags != "" {
		line("Tags", d.Tags)
	}
	keys := make([]string, 0, len(d.Labels))
	for k := range d.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		line("Tag "+k, d.Labels[k])
	}
	line("Updated at", d.UpdatedAt.Format(time.RFC3339))
	line("Stale", d.Stale)
	tw.Flush()
}
