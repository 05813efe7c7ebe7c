package failover

import (
	"fmt"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// history is a member's transaction history (retrieved ∪ executed) in either
// flavor, so ranking works the same for both.
type history struct {
	flavor gtid.Flavor
	set    gtid.Set
	pos    gtid.MariaDBPos
}

func parseHistory(flavor gtid.Flavor, executed, retrieved string) (history, error) {
	h := history{flavor: flavor}
	switch flavor {
	case gtid.MySQL:
		for _, s := range []string{executed, retrieved} {
			set, err := gtid.ParseSet(s)
			if err != nil {
				return history{}, err
			}
			h.set = h.set.Union(set)
		}
	case gtid.MariaDB:
		for _, s := range []string{executed, retrieved} {
			pos, err := gtid.ParseMariaDBPos(s)
			if err != nil {
				return history{}, err
			}
			h.pos = h.pos.Merge(pos)
		}
	default:
		return history{}, fmt.Errorf("unknown flavor %v", flavor)
	}
	return h, nil
}

func (h history) union(o history) history {
	return history{flavor: h.flavor, set: h.set.Union(o.set), pos: h.pos.Merge(o.pos)}
}

// lacks counts the transactions of o that h does not have.
func (h history) lacks(o history) uint64 {
	if h.flavor == gtid.MariaDB {
		return h.pos.Behind(o.pos)
	}
	return o.set.Subtract(h.set).Count()
}
