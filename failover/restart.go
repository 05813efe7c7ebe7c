package failover

import "time"

// Restarts (agentctl restart): whether this member's mysqld may be
// restarted now, and whether it has been already. The member's agent
// judges a request by these rules.

// RestartRefusal says why the member's mysqld must not be restarted now;
// "" when it may. The holder's never is: agentctl switches over first, and
// a request that raced a failover back to the member is refused.
func RestartRefusal(holdsLock bool) string {
	if holdsLock {
		return "refused: this member holds the leader lock; agentctl restart switches over first"
	}
	return ""
}

// RestartClockMargin is how much later than the request a mysqld must have
// started to count as restarted already: its start is known to the second
// (its Uptime), and the request's time is agentctl's clock, which may run
// behind the agent's by the rest.
const RestartClockMargin = 5 * time.Second

// RestartedSince reports whether a mysqld that started at started has
// been restarted since a request made at requested: an agent that crashed
// after the restart, before it cleared the request, must not restart it
// again. A mysqld back within the margin is restarted once more (if its
// agent crashed): a second restart, never a skipped one, unless agentctl's
// clock runs behind by more than the margin less a second.
func RestartedSince(started, requested time.Time) bool {
	return started.After(requested.Add(RestartClockMargin))
}
