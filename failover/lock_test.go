package failover

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestFailsafePromise: which leader's request a member confirms, and for
// how long it then promises not to race.
func TestFailsafePromise(t *testing.T) {
	view := func() FailsafeView {
		return FailsafeView{Self: "db2", Enabled: true, TTL: 10 * time.Second, Leader: "db1", Instance: "i1"}
	}
	ask := FailsafeAsk{Leader: "db1", Instance: "i1", Hold: 10 * time.Second}
	for _, c := range []struct {
		name string
		ask  FailsafeAsk
		view func(*FailsafeView)
		want time.Duration // 0: refused
	}{
		{"the holder we see asks: promise its ttl", ask, nil, 10 * time.Second},
		{"its ttl is longer than ours: promise its", FailsafeAsk{Leader: "db1", Instance: "i1", Hold: 30 * time.Second}, nil, 30 * time.Second},
		{"ours is longer (a set-config it missed): promise ours", ask, func(v *FailsafeView) { v.TTL = 20 * time.Second }, 20 * time.Second},
		{"an older leader sends no hold: ours", FailsafeAsk{Leader: "db1", Instance: "i1"}, nil, 10 * time.Second},
		{"our view of the lock expired: still confirm", ask, func(v *FailsafeView) { v.Leader, v.Instance = "", "" }, 10 * time.Second},
		{"failsafe mode off", ask, func(v *FailsafeView) { v.Enabled = false }, 0},
		{"we hold the lock", ask, func(v *FailsafeView) { v.Holding = true }, 0},
		{"the lock names another member", ask, func(v *FailsafeView) { v.Leader = "db3" }, 0},
		{"the lock names another instance of it", ask, func(v *FailsafeView) { v.Instance = "i0" }, 0},
		{"it names us", FailsafeAsk{Leader: "db2", Instance: "i2"}, func(v *FailsafeView) { v.Leader, v.Instance = "db2", "i2" }, 0},
		{"no instance", FailsafeAsk{Leader: "db1"}, nil, 0},
		{"a hold no ttl can have", FailsafeAsk{Leader: "db1", Instance: "i1", Hold: dcs.MaxTTL + time.Millisecond}, nil, 0},
		{"a negative hold", FailsafeAsk{Leader: "db1", Instance: "i1", Hold: -time.Second}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := view()
			if c.view != nil {
				c.view(&v)
			}
			got, err := FailsafePromise(c.ask, v)
			if c.want == 0 {
				if !errors.Is(err, ErrFailsafeRefused) {
					t.Errorf("FailsafePromise = %v, %v; want refused", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("FailsafePromise = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// TestFailsafeUnconfirmed: every member but the leader must confirm, not
// a majority.
func TestFailsafeUnconfirmed(t *testing.T) {
	members := []string{"db1", "db2", "db3", "db4", "db5"}
	for _, c := range []struct {
		name      string
		confirmed []string
		want      []string
	}{
		{"all confirmed", []string{"db2", "db3", "db4", "db5"}, nil},
		{"a majority is not enough", []string{"db2", "db3", "db4"}, []string{"db5"}},
		{"nobody answered", nil, []string{"db2", "db3", "db4", "db5"}},
		{"the leader's own confirmation is not asked for", []string{"db1", "db2", "db3", "db4"}, []string{"db5"}},
	} {
		confirmed := map[string]bool{}
		for _, n := range c.confirmed {
			confirmed[n] = true
		}
		if got := FailsafeUnconfirmed("db1", members, confirmed); !slices.Equal(got, c.want) {
			t.Errorf("%s: FailsafeUnconfirmed = %v, want %v", c.name, got, c.want)
		}
	}
	if got := FailsafeUnconfirmed("db1", []string{"db1"}, nil); len(got) != 0 {
		t.Errorf("a single-member cluster: %v, want none to ask", got)
	}
}
