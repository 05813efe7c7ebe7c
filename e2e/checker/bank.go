package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The bank: accounts whose total never changes, and transfers that each
// move an amount between two accounts and log themselves, all in one
// transaction. A member's books are right when its total is the initial
// one and its balances are exactly the initial ones moved by the transfers
// in its own log: a half-applied or doubly-applied transfer shows.

// Transfer is one transfer, as the client sent it or a member logged it.
type Transfer struct {
	ID       int64
	From, To int
	Amount   int64
}

// Ledger is one member's bank at the end of a scenario.
type Ledger struct {
	Member   string
	Primary  bool
	Balances map[int]int64
	Log      map[int64]Transfer
	// Checksum: CHECKSUM TABLE of the accounts and the log, equal on every
	// member that holds the same books.
	Checksum string
}

// BankReport is the bank's verdict material.
type BankReport struct {
	// Total is what the accounts must always add up to.
	Total int64
	Acked int
	// Lost: acknowledged transfers missing from the final primary's log.
	// Missing: per other member, acknowledged transfers missing from it.
	Lost    []int64
	Missing map[string]int
	// Wrong lists every member whose books do not add up, or whose log
	// differs from what the client sent.
	Wrong []string
	// ChecksumsEqual: every member's tables have the same checksums.
	ChecksumsEqual bool
	Checksums      map[string]string
}

// CheckBank judges the members' ledgers against the initial balances and
// the transfers the client saw acknowledged.
func CheckBank(initial map[int]int64, acked []Transfer, ledgers []Ledger) BankReport {
	r := BankReport{Acked: len(acked), Missing: map[string]int{}, Checksums: map[string]string{}}
	for _, b := range initial {
		r.Total += b
	}
	sums := map[string]bool{}
	for _, l := range ledgers {
		r.Wrong = append(r.Wrong, l.books(initial, r.Total)...)
		var missing []int64
		for _, t := range acked {
			logged, ok := l.Log[t.ID]
			switch {
			case !ok:
				missing = append(missing, t.ID)
			case logged != t:
				r.Wrong = append(r.Wrong, fmt.Sprintf("%s logged transfer %d as %+v, the client sent %+v", l.Member, t.ID, logged, t))
			}
		}
		if l.Primary {
			r.Lost = missing
		} else {
			r.Missing[l.Member] = len(missing)
		}
		sums[l.Checksum] = true
		r.Checksums[l.Member] = l.Checksum
	}
	r.ChecksumsEqual = len(ledgers) > 0 && len(sums) == 1
	return r
}

// books checks one ledger: its total, and its balances against its log.
func (l Ledger) books(initial map[int]int64, total int64) []string {
	var wrong []string
	var sum int64
	for _, b := range l.Balances {
		sum += b
	}
	if sum != total {
		wrong = append(wrong, fmt.Sprintf("%s's accounts add up to %d, not %d", l.Member, sum, total))
	}
	want := maps.Clone(initial)
	for _, t := range l.Log {
		want[t.From] -= t.Amount
		want[t.To] += t.Amount
	}
	for _, a := range slices.Sorted(maps.Keys(want)) {
		if got, ok := l.Balances[a]; !ok || got != want[a] {
			wrong = append(wrong, fmt.Sprintf("%s's account %d holds %d; its log of %d transfers says %d", l.Member, a, got, len(l.Log), want[a]))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(l.Balances)) {
		if _, ok := want[a]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s has an account %d that was never opened", l.Member, a))
		}
	}
	return wrong
}

// Violations lists the bank's broken promises: books that do not add up
// (never allowed), checksums that differ, acknowledged transfers lost
// beyond what the scenario allows, a replica missing transfers the primary
// has.
func (r BankReport) Violations(e Expect) []string {
	v := slices.Clone(r.Wrong)
	if !r.ChecksumsEqual {
		v = append(v, "the members' bank checksums differ: "+r.checksumList())
	}
	if len(r.Lost) > e.MayLose {
		v = append(v, fmt.Sprintf("%d acknowledged transfers lost (allowed %d), first ids %v", len(r.Lost), e.MayLose, r.Lost[:min(5, len(r.Lost))]))
	}
	for _, m := range sortedKeys(r.Missing) {
		if n := r.Missing[m]; n > len(r.Lost) {
			v = append(v, fmt.Sprintf("replica %s lacks %d acknowledged transfers that the primary has", m, n-len(r.Lost)))
		}
	}
	return v
}

func (r BankReport) checksumList() string {
	var out []string
	for _, m := range sortedKeys(r.Checksums) {
		out = append(out, fmt.Sprintf("%s=%q", m, r.Checksums[m]))
	}
	return strings.Join(out, " ")
}
