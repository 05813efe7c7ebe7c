package checker

import (
	"strings"
	"testing"
)

func TestCheckBank(t *testing.T) {
	initial := map[int]int64{1: 100, 2: 100, 3: 100}
	t1 := Transfer{ID: 10, From: 1, To: 2, Amount: 30}
	t2 := Transfer{ID: 11, From: 2, To: 3, Amount: 5}
	// books applies transfers to the initial balances and logs them.
	books := func(member string, primary bool, checksum string, ts ...Transfer) Ledger {
		l := Ledger{Member: member, Primary: primary, Checksum: checksum, Balances: map[int]int64{1: 100, 2: 100, 3: 100}, Log: map[int64]Transfer{}}
		for _, tr := range ts {
			l.Balances[tr.From] -= tr.Amount
			l.Balances[tr.To] += tr.Amount
			l.Log[tr.ID] = tr
		}
		return l
	}
	halfApplied := books("db2", false, "x", t1)
	halfApplied.Balances[2] -= t1.Amount // the credit missing, the log row present
	tampered := books("db2", false, "x", t1, t2)
	tampered.Log[t2.ID] = Transfer{ID: 11, From: 2, To: 3, Amount: 6}
	tampered.Balances[2], tampered.Balances[3] = 69, 106
	stranger := books("db2", false, "x", t1, t2)
	stranger.Balances[9] = 0

	for _, c := range []struct {
		name    string
		acked   []Transfer
		ledgers []Ledger
		expect  Expect
		want    []string // substrings of the violations, in order; none: clean
	}{
		{"all present everywhere", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1, t2), books("db2", false, "x", t1, t2)}, Expect{}, nil},
		{"an unacknowledged transfer applied whole is fine", []Transfer{t1},
			[]Ledger{books("db1", true, "x", t1, t2), books("db2", false, "x", t1, t2)}, Expect{}, nil},
		{"an acknowledged transfer lost", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1), books("db2", false, "x", t1)}, Expect{},
			[]string{"1 acknowledged transfers lost (allowed 0), first ids [11]"}},
		{"a loss within the allowance", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1), books("db2", false, "x", t1)}, Expect{MayLose: 1}, nil},
		{"a replica behind the primary", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1, t2), books("db2", false, "y", t1)}, Expect{},
			[]string{"checksums differ", "replica db2 lacks 1 acknowledged transfers"}},
		{"a half-applied transfer", []Transfer{t1},
			[]Ledger{books("db1", true, "x", t1), halfApplied}, Expect{},
			[]string{"db2's accounts add up to 270, not 300", "db2's account 2 holds 100; its log of 1 transfers says 130"}},
		{"a logged transfer that differs from the one sent", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1, t2), tampered}, Expect{},
			[]string{"db2 logged transfer 11 as"}},
		{"an account nobody opened", []Transfer{t1, t2},
			[]Ledger{books("db1", true, "x", t1, t2), stranger}, Expect{},
			[]string{"db2 has an account 9 that was never opened"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := CheckBank(initial, c.acked, c.ledgers)
			if r.Total != 300 {
				t.Errorf("total %d, want 300", r.Total)
			}
			v := r.Violations(c.expect)
			if len(c.want) == 0 && len(v) > 0 {
				t.Fatalf("violations %q, want none", v)
			}
			for _, w := range c.want {
				if !strings.Contains(strings.Join(v, "\n"), w) {
					t.Errorf("violations %q lack %q", v, w)
				}
			}
		})
	}
}
