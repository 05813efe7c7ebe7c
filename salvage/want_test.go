package salvage

import (
	"errors"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

func TestUnitNotIn(t *testing.T) {
	tests := []struct {
		name, leader string
		member       gtid.MariaDBGTID
		extra        bool
	}{
		{"leader has it", "0-1-5", g(0, 1, 5), false},
		{"leader has a later one from the same server", "0-1-9", g(0, 1, 5), false},
		{"leader stopped before it", "0-1-5", g(0, 1, 6), true},
		{"fork: the leader's domain is further on, but not server 1", "0-1-5,0-2-7", g(0, 1, 6), true},
		{"fork: what the leader has of server 1", "0-1-5,0-2-7", g(0, 1, 5), false},
		{"server the leader never logged", "0-1-5,0-2-7", g(0, 3, 1), true},
		{"domain the leader never logged", "0-1-5", g(5, 1, 1), true},
		{"same server in another domain counts separately", "0-1-50,1-1-2", g(1, 1, 3), true},
		{"empty leader state: everything is extra", "", g(0, 1, 1), true},
		{"whitespace around entries", " 0-1-5 , 0-2-7 ", g(0, 2, 7), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := NotIn(tc.leader)
			if err != nil {
				t.Fatalf("NotIn(%q): %v", tc.leader, err)
			}
			if got := want(tc.member); got != tc.extra {
				t.Errorf("NotIn(%q)(%v) = %v, want %v", tc.leader, tc.member, got, tc.extra)
			}
		})
	}
}

func TestUnitNotInRejectsBadState(t *testing.T) {
	tests := []struct{ state, says string }{
		{"0-1", "entry 1"},
		{"0-1-5,", "entry 2 is empty"},
		{"0-1-5,,0-2-3", "entry 2 is empty"},
		{"0-1-5,0-1-7", "domain 0, server_id 1 appears twice"},
		{"3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", "entry 1"},
		{"0-1-x", "seq_no"},
		{"0-1-5 0-2-3", "entry 1"},
	}
	for _, tc := range tests {
		_, err := NotIn(tc.state)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "gtid_binlog_state") {
			t.Errorf("NotIn(%q) error = %v; want one naming gtid_binlog_state and saying %q", tc.state, err, tc.says)
		}
		if err != nil && strings.Contains(tc.says, "entry 1") && !errors.Is(err, gtid.ErrMalformed) {
			t.Errorf("NotIn(%q) error %v does not match gtid.ErrMalformed", tc.state, err)
		}
	}
}

func TestUnitSummarize(t *testing.T) {
	got := summarize([]gtid.MariaDBGTID{g(0, 1, 6), g(5, 1, 1), g(0, 1, 7), g(0, 7, 9), g(0, 1, 9)})
	if want := "0-1-6..0-1-9 (3), 0-7-9 (1), 5-1-1 (1)"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
	if got := summarize(nil); got != "" {
		t.Errorf("summarize(nil) = %q", got)
	}
}
