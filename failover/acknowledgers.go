package failover

import (
	"slices"
	"strings"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// TagAcknowledgers, on a lossless primary's record, lists (comma-separated,
// possibly none) the members that may hold one of its acknowledged writes
// that no other listed member holds. A candidate waits for every unseen
// listed member, and for every unseen member whose record is fresh (it may
// have joined since the list was written); an unlisted member whose record
// is stale, such as the leftover record of a member scaled away, is not
// waited for. Without the tag (an older agent, or no record of the old
// primary) every unseen member counts, as before.
const TagAcknowledgers = "acknowledgers"

// AckPeer is what a lossless primary saw of one other member this
// iteration, for TrackAcknowledgers.
type AckPeer struct {
	Name string
	// Streaming: its mysqld answered, pulling from us with its semi-sync
	// receiver on: it acknowledges our writes now.
	Streaming bool
	// Live: its record is fresh: its agent runs, and may start its
	// receiver at any moment, also after the last list we publish.
	Live bool
	// Executed and Retrieved are its history, when it answered.
	Executed, Retrieved string
}

// TrackAcknowledgers is the primary's list of possible acknowledgers after
// this iteration. listed maps each listed member to what it may hold
// beyond the others: "" while it streams or its agent is live, else our
// executed set when it was first seen neither (it can have acknowledged
// nothing after that unless it is still connected, which clients rules
// out). A member joins the list when it streams, and whenever its record is
// fresh: our agent may die, our mysqld live on, and such a member start
// streaming and acknowledge after our last list (found by the random-fault
// loop test). It leaves once it neither streams nor is live, our
// semi-sync clients are no more than the members that do (so it is not
// one of them, connected behind a path our probe cannot take), and a
// streaming member's history holds all it may have acknowledged. So every
// acknowledged write is always on a listed member, and a member gone for
// good leaves the list within seconds of a streaming replica catching up.
func TrackAcknowledgers(flavor gtid.Flavor, listed map[string]string, peers []AckPeer, ourExecuted string, clients int) map[string]string {
	var streaming []gtid.History
	for _, p := range peers {
		if p.Streaming {
			if h, err := gtid.ParseHistory(flavor, p.Executed, p.Retrieved); err == nil {
				streaming = append(streaming, h)
			}
		}
	}
	out := map[string]string{}
	for _, p := range peers {
		if p.Streaming || p.Live {
			out[p.Name] = ""
			continue
		}
		upTo, ok := listed[p.Name]
		if !ok {
			continue
		}
		if upTo == "" {
			upTo = ourExecuted
		}
		if !(clients <= len(streaming) && heldByOne(flavor, streaming, upTo)) {
			out[p.Name] = upTo
		}
	}
	return out
}

// heldByOne reports whether one of hs holds every transaction of set.
func heldByOne(flavor gtid.Flavor, hs []gtid.History, set string) bool {
	want, err := gtid.ParseHistory(flavor, set, "")
	if err != nil {
		return false
	}
	return slices.ContainsFunc(hs, func(h gtid.History) bool { return h.Missing(want) == 0 })
}

// FormatAcknowledgers is the tag's value for a list from TrackAcknowledgers.
func FormatAcknowledgers(listed map[string]string) string {
	names := make([]string, 0, len(listed))
	for n := range listed {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// parseAcknowledgers reads the tag; known is false when it is absent.
func parseAcknowledgers(tags map[string]string) (names []string, known bool) {
	v, ok := tags[TagAcknowledgers]
	if !ok {
		return nil, false
	}
	if v == "" {
		return []string{}, true
	}
	return strings.Split(v, ","), true
}
