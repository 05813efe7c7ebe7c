package gtid

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustHistory(t *testing.T, flavor Flavor, executed, retrieved string) History {
	t.Helper()
	h, err := ParseHistory(flavor, executed, retrieved)
	if err != nil {
		t.Fatalf("ParseHistory(%v, %q, %q): %v", flavor, executed, retrieved, err)
	}
	return h
}

func TestParseHistory(t *testing.T) {
	tests := []struct {
		name                string
		flavor              Flavor
		executed, retrieved string
		want                string
	}{
		{"mysql both empty", MySQL, "", "", ""},
		{"mysql executed only", MySQL, u1 + ":1-10", "", u1 + ":1-10"},
		{"mysql retrieved only", MySQL, "", u1 + ":1-10", u1 + ":1-10"},
		{"mysql relay log ahead", MySQL, u1 + ":1-10", u1 + ":5-12", u1 + ":1-12"},
		{"mysql two sources", MySQL, u1 + ":1-10", u2 + ":1-3", u1 + ":1-10," + u2 + ":1-3"},
		{"mysql tagged", MySQL, u1 + ":1-2", u1 + ":t:1", u1 + ":1-2:t:1"},
		{"mariadb both empty", MariaDB, "", "", ""},
		{"mariadb executed only", MariaDB, "0-1-10", "", "0-1-10"},
		{"mariadb retrieved only", MariaDB, "", "0-1-10", "0-1-10"},
		{"mariadb relay log ahead", MariaDB, "0-1-10", "0-1-12", "0-1-12"},
		{"mariadb executed ahead", MariaDB, "0-1-12", "0-1-10", "0-1-12"},
		{"mariadb per domain maximum", MariaDB, "0-1-10,1-2-5", "0-1-12,2-3-1", "0-1-12,1-2-5,2-3-1"},
		// Same seq_no in a domain: the executed GTID is kept.
		{"mariadb tie keeps executed", MariaDB, "0-2-10", "0-1-10", "0-2-10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustHistory(t, tt.flavor, tt.executed, tt.retrieved).String(); got != tt.want {
				t.Errorf("ParseHistory(%v, %q, %q) = %q, want %q", tt.flavor, tt.executed, tt.retrieved, got, tt.want)
			}
		})
	}
}

func TestParseHistoryErrors(t *testing.T) {
	tests := []struct {
		name                string
		flavor              Flavor
		executed, retrieved string
		malformed           bool
		msg                 string
	}{
		{"mysql bad executed", MySQL, "nope", u1 + ":1", true, "executed GTID set: gtid: parsing"},
		{"mysql bad retrieved", MySQL, u1 + ":1", u1 + ":0", true, "retrieved GTID set: gtid: parsing"},
		{"mariadb bad executed", MariaDB, "0-1", "0-1-1", true, "executed GTID position: gtid: parsing"},
		{"mariadb bad retrieved", MariaDB, "0-1-1", "0-1-x", true, "retrieved GTID position: gtid: parsing"},
		{"mysql syntax for mariadb", MariaDB, u1 + ":1", "", true, "executed GTID position"},
		{"mariadb syntax for mysql", MySQL, "", "0-1-1", true, "retrieved GTID set"},
		{"zero flavor", Flavor(0), "", "", false, "gtid: unknown flavor Flavor(0)"},
		{"unknown flavor", Flavor(42), "", "", false, "gtid: unknown flavor Flavor(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHistory(tt.flavor, tt.executed, tt.retrieved)
			if err == nil {
				t.Fatalf("ParseHistory = %q, want error", h)
			}
			if !reflect.DeepEqual(h, History{}) {
				t.Errorf("ParseHistory returned %q alongside an error, want the zero History", h)
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

func TestHistoryMissing(t *testing.T) {
	tests := []struct {
		name   string
		flavor Flavor
		h, o   string // executed GTIDs; the retrieved side is covered by TestParseHistory
		want   uint64
	}{
		{"mysql equal", MySQL, u1 + ":1-10", u1 + ":1-10", 0},
		{"mysql behind", MySQL, u1 + ":1-7", u1 + ":1-10", 3},
		{"mysql ahead", MySQL, u1 + ":1-10", u1 + ":1-7", 0},
		{"mysql hole", MySQL, u1 + ":1-4:6-10", u1 + ":1-10", 1},
		{"mysql other source", MySQL, u1 + ":1-10", u1 + ":1-10," + u2 + ":1-5", 5},
		// A set counts a fork: each side lacks the other's transactions.
		{"mysql forked", MySQL, u1 + ":1-10," + u2 + ":1", u1 + ":1-10," + u3 + ":1-2", 2},
		{"mysql from empty", MySQL, "", u1 + ":1-10", 10},
		{"mariadb equal", MariaDB, "0-1-10", "0-1-10", 0},
		{"mariadb behind", MariaDB, "0-1-7", "0-1-10", 3},
		{"mariadb ahead", MariaDB, "0-1-10", "0-1-7", 0},
		{"mariadb missing domain", MariaDB, "0-1-10", "0-1-10,1-2-4", 4},
		{"mariadb domains summed", MariaDB, "0-1-8,1-2-1", "0-1-10,1-2-4", 5},
		// A position measures lag, not divergence: same seq_no from another
		// server counts as nothing missing.
		{"mariadb forked at same seq", MariaDB, "0-2-10", "0-1-10", 0},
		{"mariadb from empty", MariaDB, "", "0-1-10", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, o := mustHistory(t, tt.flavor, tt.h, ""), mustHistory(t, tt.flavor, tt.o, "")
			if got := h.Missing(o); got != tt.want {
				t.Errorf("History(%q).Missing(%q) = %d, want %d", tt.h, tt.o, got, tt.want)
			}
			if got := h.Missing(h.Union(o)); got != tt.want {
				t.Errorf("History(%q).Missing(its union with %q) = %d, want %d", tt.h, tt.o, got, tt.want)
			}
			if got := h.Union(o).Missing(h); got != 0 {
				t.Errorf("union of %q and %q lacks %d of the first, want 0", tt.h, tt.o, got)
			}
		})
	}
}

func TestHistoryUnion(t *testing.T) {
	tests := []struct {
		name   string
		flavor Flavor
		a, b   string
		want   string
	}{
		{"mysql", MySQL, u1 + ":1-5", u1 + ":3-9," + u2 + ":1", u1 + ":1-9," + u2 + ":1"},
		{"mariadb", MariaDB, "0-1-5,1-1-9", "0-2-7", "0-2-7,1-1-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustHistory(t, tt.flavor, tt.a, ""), mustHistory(t, tt.flavor, tt.b, "")
			if got := a.Union(b).String(); got != tt.want {
				t.Errorf("%q ∪ %q = %q, want %q", tt.a, tt.b, got, tt.want)
			}
			// The zero History is the empty history and takes the other's
			// flavor, so a union over members may start from it.
			var zero History
			if got := zero.Union(a); got.String() != a.String() || got.flavor != tt.flavor {
				t.Errorf("zero ∪ %q = %q (flavor %v), want %q (flavor %v)", tt.a, got, got.flavor, a, tt.flavor)
			}
			if got := a.Union(zero).Missing(a); got != 0 {
				t.Errorf("%q ∪ zero lacks %d of %q, want 0", tt.a, got, tt.a)
			}
			if got := zero.Missing(a); got != count(a) {
				t.Errorf("zero History lacks %d of %q, want all %d", got, tt.a, count(a))
			}
		})
	}
}

// count is how many transactions h holds: what the empty history lacks
// of it, computed without Missing.
func count(h History) uint64 {
	if h.flavor == MariaDB {
		var n uint64
		for _, g := range h.pos.GTIDs() {
			n += g.Seq
		}
		return n
	}
	return h.set.Count()
}

func TestHistoryWithout(t *testing.T) {
	tests := []struct {
		name          string
		flavor        Flavor
		h, errant     string
		want          string
		wantErrSubstr string
	}{
		{"mysql: the errant transactions go", MySQL, u1 + ":1-10," + u2 + ":1-2", u2 + ":1-2", u1 + ":1-10", ""},
		{"mysql: nothing errant", MySQL, u1 + ":1-10", "", u1 + ":1-10", ""},
		{"mariadb: an errant domain goes whole", MariaDB, "0-1-10,1-3-4", "1-3-4", "0-1-10", ""},
		{"mariadb: a binlog state naming one domain twice", MariaDB, "0-3-12,2-1-5", "0-3-12,0-4-2", "2-1-5", ""},
		{"mariadb: nothing errant", MariaDB, "0-1-10", "", "0-1-10", ""},
		{"mysql: malformed", MySQL, u1 + ":1-10", "nonsense", "", "errant GTIDs"},
		{"mariadb: malformed", MariaDB, "0-1-10", "0-x", "", "errant GTIDs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustHistory(t, tt.flavor, tt.h, "").Without(tt.errant)
			if tt.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) {
					t.Fatalf("Without(%q) error = %v, want one containing %q", tt.errant, err, tt.wantErrSubstr)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("%q without %q = %q, %v; want %q", tt.h, tt.errant, got, err, tt.want)
			}
		})
	}
}
