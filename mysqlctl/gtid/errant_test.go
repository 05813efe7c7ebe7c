package gtid

import (
	"errors"
	"strings"
	"testing"
)

func TestErrantMySQL(t *testing.T) {
	tests := []struct {
		name, replica, primary, want string
	}{
		{"identical", u1 + ":1-100", u1 + ":1-100", ""},
		{"replica behind", u1 + ":1-50", u1 + ":1-100", ""},
		{"both empty", "", "", ""},
		{"replica ahead on primary uuid", u1 + ":1-101", u1 + ":1-100", u1 + ":101"},
		{"local write on replica", u1 + ":1-100," + u2 + ":1-3", u1 + ":1-100", u2 + ":1-3"},
		{"hole filled on replica", u1 + ":1-100", u1 + ":1-49:51-100", u1 + ":50"},
		{"behind but errant", u1 + ":1-50," + u2 + ":7", u1 + ":1-100", u2 + ":7"},
		{"errant tagged transaction", u1 + ":1-10:t:1", u1 + ":1-10", u1 + ":t:1"},
		{"replica empty", "", u1 + ":1-100", ""},
		{"primary empty", u1 + ":1-2", "", u1 + ":1-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrantMySQL(mustSet(t, tt.replica), mustSet(t, tt.primary))
			if got.String() != tt.want {
				t.Errorf("ErrantMySQL = %q, want %q", got, tt.want)
			}
			s, err := Errant(MySQL, tt.replica, tt.primary)
			if err != nil || s != tt.want {
				t.Errorf("Errant(MySQL) = %q, %v; want %q", s, err, tt.want)
			}
		})
	}
}

func TestErrantMariaDB(t *testing.T) {
	tests := []struct {
		name, replica, primary, want string
	}{
		{"identical", "0-1-100", "0-1-100", ""},
		{"both empty", "", "", ""},
		{"replica behind", "0-1-50,1-2-3", "0-1-100,1-2-9", ""},
		{"replica behind, history written by another server", "0-2-50", "0-1-100", ""},
		{"replica missing a domain", "0-1-100", "0-1-100,1-2-9", ""},
		{"higher seq", "0-1-101", "0-1-100", "0-1-101"},
		{"higher seq from local write", "0-3-101", "0-1-100", "0-3-101"},
		{"domain primary lacks", "0-1-100,7-3-2", "0-1-100", "7-3-2"},
		{"same seq different server forks", "0-3-100", "0-1-100", "0-3-100"},
		{"several offending domains only", "0-1-101,1-2-5,2-2-9", "0-1-100,1-2-5", "0-1-101,2-2-9"},
		{"behind in one domain errant in another", "0-1-50,1-1-9", "0-1-100,1-1-8", "1-1-9"},
		{"seq zero is never errant", "0-1-0,5-5-0", "", ""},
		{"replica empty", "", "0-1-5", ""},
		{"primary empty", "0-1-5", "", "0-1-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, p := mustPos(t, tt.replica), mustPos(t, tt.primary)
			got := ErrantMariaDB(r, p)
			checkPosInvariant(t, got)
			if got.String() != tt.want {
				t.Errorf("ErrantMariaDB = %q, want %q", got, tt.want)
			}
			// No errant transactions exactly when the primary has everything.
			if got.IsEmpty() != p.Contains(r) {
				t.Errorf("errant empty = %v but primary.Contains(replica) = %v", got.IsEmpty(), p.Contains(r))
			}
			s, err := Errant(MariaDB, tt.replica, tt.primary)
			if err != nil || s != tt.want {
				t.Errorf("Errant(MariaDB) = %q, %v; want %q", s, err, tt.want)
			}
		})
	}
}

func TestErrantErrors(t *testing.T) {
	tests := []struct {
		name             string
		flavor           Flavor
		replica, primary string
		malformed        bool
		msg              string
	}{
		{"mysql bad replica", MySQL, "nope", u1 + ":1", true, "replica GTID set: gtid: parsing"},
		{"mysql bad primary", MySQL, u1 + ":1", u1 + ":0", true, "primary GTID set: gtid: parsing"},
		{"mariadb bad replica", MariaDB, "0-1", "0-1-1", true, "replica GTID position: gtid: parsing"},
		{"mariadb bad primary", MariaDB, "0-1-1", u1 + ":1", true, "primary GTID position: gtid: parsing"},
		{"mysql syntax for mariadb", MariaDB, u1 + ":1", "", true, "replica GTID position"},
		{"mariadb syntax for mysql", MySQL, "0-1-1", "", true, "replica GTID set"},
		{"zero flavor", Flavor(0), "", "", false, "gtid: unknown flavor Flavor(0)"},
		{"unknown flavor", Flavor(42), "", "", false, "gtid: unknown flavor Flavor(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Errant(tt.flavor, tt.replica, tt.primary)
			if err == nil {
				t.Fatalf("Errant = %q, want error", got)
			}
			if got != "" {
				t.Errorf("Errant returned %q alongside an error", got)
			}
			if errors.Is(err, ErrMalformed) != tt.malformed {
				t.Errorf("errors.Is(ErrMalformed) = %v, want %v (%v)", !tt.malformed, tt.malformed, err)
			}
			if !strings.HasPrefix(err.Error(), tt.msg) {
				t.Errorf("error %q does not start with %q", err, tt.msg)
			}
		})
	}
}

func TestFlavorString(t *testing.T) {
	for f, want := range map[Flavor]string{MySQL: "mysql", MariaDB: "mariadb", 0: "Flavor(0)", -3: "Flavor(-3)"} {
		if got := f.String(); got != want {
			t.Errorf("Flavor(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}

func TestErrantMariaDBState(t *testing.T) {
	cases := []struct{ name, replica, primary, want string }{
		{"behind on the primary's own server", "0-1-98", "0-1-100", ""},
		{"same history", "0-1-100,0-2-150", "0-2-150,0-1-100", ""},
		{"a write of its own the primary never had (behind by position)", "0-1-20,0-2-29", "0-1-244", "0-2-29"},
		{"ahead on the old primary's server after a failover", "0-1-100", "0-1-98,0-2-120", "0-1-100"},
		{"a domain the primary lacks", "0-1-5,1-3-2", "0-1-5", "1-3-2"},
		{"empty replica", "", "0-1-5", ""},
		{"seq 0 carries nothing", "0-3-0", "0-1-5", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ErrantMariaDBState(c.replica, c.primary)
			if err != nil || got != c.want {
				t.Errorf("ErrantMariaDBState(%q, %q) = %q, %v; want %q", c.replica, c.primary, got, err, c.want)
			}
		})
	}
	if _, err := ErrantMariaDBState("0-1-x", "0-1-1"); err == nil {
		t.Error("a malformed state was accepted")
	}
	if _, err := ErrantMariaDBState("0-1-1,,0-2-2", "0-1-1"); err == nil {
		t.Error("an empty list element was accepted")
	}
}
