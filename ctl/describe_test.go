package ctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/dcs"
)

const longReplicationError = "Got fatal error 1236 from master when reading data from binary log: " +
	"'Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old " +
	"and required binlog files have been purged.'"

// breakDB3 publishes db3 with a long replication error.
func breakDB3(t *testing.T, f *fixture) {
	t.Helper()
	m := dcs.Member{Name: "db3", Role: dcs.RoleReplica, MySQLAddr: "db3:3306", APIURL: "http://db3:8008",
		GTIDExecuted: "0-1-97", Replication: dcs.ReplicationBroken, ReplicationError: longReplicationError}
	if err := f.stores["db3"].UpdateMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestStatusTableCutsLongCells: a long replication error is cut in the
// table, with a pointer to where it is whole, and whole in JSON.
func TestStatusTableCutsLongCells(t *testing.T) {
	f := newFixture(t)
	breakDB3(t, f)
	ctx := context.Background()
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	out := f.out.String()
	if strings.Contains(out, "purged") || !strings.Contains(out, "broken: Got fatal error 1236") || !strings.Contains(out, "describe MEMBER") {
		t.Fatalf("the long error is not cut, or the cut is not explained:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("a %d-rune line: %s", n, line)
		}
	}
	f.out.Reset()
	if err := f.cli.Status(ctx, JSON, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "purged.") {
		t.Fatalf("-o json cuts the error:\n%s", f.out)
	}
}

func TestDescribeShowsTheWholeRecord(t *testing.T) {
	f := newFixture(t)
	breakDB3(t, f)
	ctx := context.Background()
	if err := f.cli.Describe(ctx, Table, "db3"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Member:", "db3", "broken: " + longReplicationError, "Replication error:", "MySQL address:", "db3:3306",
		"Lag (transactions):", "3", "Lock holder:", "false"} {
		if !strings.Contains(f.out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, f.out)
		}
	}
	f.out.Reset()
	if err := f.cli.Describe(ctx, JSON, "db1"); err != nil {
		t.Fatal(err)
	}
	var d MemberDetail
	if err := json.Unmarshal(f.out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "db1" || !d.LockHolder || d.Role != "primary" || d.APIURL != "http://db1:8008" {
		t.Fatalf("describe db1 as JSON: %+v", d)
	}
	exitCode(t, f.cli.Describe(ctx, Table, "db9"), ExitUnknownMember)
}
