package gtid

import "testing"

func TestRestoredBinlogState(t *testing.T) {
	for _, tc := range []struct{ name, donor, pos, want string }{
		{"one writer", "0-1-205", "0-1-200", "0-1-200"},
		// Server 1 wrote before the backup, 2 wrote it and after: the
		// member learns 2's later entry by replicating it.
		{"an earlier writer", "0-1-3,0-2-260", "0-2-205", "0-1-3,0-2-205"},
		// Server 3 wrote only after the backup: not known yet.
		{"a later writer", "0-1-3,0-2-205,0-3-300", "0-2-205", "0-1-3,0-2-205"},
		{"domains", "1-5-9,0-1-3,0-2-205,2-7-1", "0-2-205,1-5-9", "0-1-3,0-2-205,1-5-9"},
		{"empty donor state", "", "0-2-205", "0-2-205"},
	} {
		got, err := RestoredBinlogState(tc.donor, tc.pos)
		if err != nil || got != tc.want {
			t.Errorf("%s: RestoredBinlogState(%q, %q) = %q, %v; want %q", tc.name, tc.donor, tc.pos, got, err, tc.want)
		}
	}
	for _, bad := range [][2]string{{"0-1", "0-1-2"}, {"0-1-2", "zero"}} {
		if _, err := RestoredBinlogState(bad[0], bad[1]); err == nil {
			t.Errorf("RestoredBinlogState(%q, %q): no error", bad[0], bad[1])
		}
	}
}
