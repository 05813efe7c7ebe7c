package mysqlctl

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// TestCloneStatements pins the statements of a rebuild. MySQL's are
// checked here only: no MySQL server runs in this test environment.
func TestCloneStatements(t *testing.T) {
	my := Dialect{Server: ServerInfo{Flavor: gtid.MySQL}}
	maria := Dialect{Server: ServerInfo{Flavor: gtid.MariaDB}}
	donor := CloneDonor{Host: "db-0.db", Port: 3306, User: "mysqlha", Password: "s3cret"}
	got, err := my.CloneFrom(donor)
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{
		{SQL: "INSTALL PLUGIN clone SONAME 'mysql_clone.so'"},
		{SQL: "SET GLOBAL clone_valid_donor_list = ?", Args: []any{"db-0.db:3306"}},
		{SQL: "CLONE INSTANCE FROM ?@?:? IDENTIFIED BY ?", Args: []any{"mysqlha", "db-0.db", 3306, "s3cret"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MySQL clone:\n%#v\nwant\n%#v", got, want)
	}
	if _, err := maria.CloneFrom(donor); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("MariaDB clone: %v, want ErrUnsupported", err)
	}
	if got := sqls(maria.SetReplicaPosition("0-1-22", "")...); !reflect.DeepEqual(got, []string{"STOP SLAVE", "SET GLOBAL gtid_slave_pos = ?"}) {
		t.Fatalf("MariaDB position: %q", got)
	}
	withState := maria.SetReplicaPosition("0-1-22", "0-2-3,0-1-22")
	if got := sqls(withState...); !reflect.DeepEqual(got, []string{"STOP SLAVE", "RESET MASTER", "SET GLOBAL gtid_binlog_state = ?", "SET GLOBAL gtid_slave_pos = ?"}) {
		t.Fatalf("MariaDB position and state: %q", got)
	}
	if a, b := withState[2].Args, withState[3].Args; !reflect.DeepEqual(a, []any{"0-2-3,0-1-22"}) || !reflect.DeepEqual(b, []any{"0-1-22"}) {
		t.Fatalf("MariaDB position args: %v %v", a, b)
	}
	if got := my.SetReplicaPosition("x", "y"); got != nil {
		t.Fatalf("MySQL position after a clone: %v, want none (gtid_executed is cloned)", got)
	}
	for _, d := range []Dialect{my, maria} {
		if d.Shutdown().SQL != "SHUTDOWN" || d.Datadir().SQL != "SELECT @@datadir" || d.Uptime().SQL != "SHOW GLOBAL STATUS LIKE 'Uptime'" {
			t.Fatalf("%v: shutdown %q, datadir %q, uptime %q", d.Server.Flavor, d.Shutdown().SQL, d.Datadir().SQL, d.Uptime().SQL)
		}
	}
}
