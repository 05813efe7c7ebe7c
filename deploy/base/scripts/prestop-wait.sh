#!/bin/bash
# prestop-wait.sh [SECONDS]: the database container's preStop hook. Returns
# once the agent beside it no longer holds the leader lock, or has exited,
# or after SECONDS (default $MYSQLHA_HANDOVER_WAIT_SECONDS, else 45).
#
# Why: on pod deletion the kubelet runs every container's preStop hook in
# parallel and sends each container SIGTERM when its own hook has returned.
# The agent has no hook, so it gets SIGTERM at once and, if it leads, hands
# the lock over to the best replica: that needs this mysqld running (the
# replica catches up from it). Without this hook mysqld would get SIGTERM at
# the same moment and shut down under the hand-over.
#
# It polls GET /lock on the agent's API (127.0.0.1, same pod, port
# $MYSQLHA_API_PORT: deploy/ sets the agent's plain health listener,
# --health-listen, since its API serves TLS): 200 while the agent holds the
# leader lock, 503 once it does not. A health check, so
# it needs no API token, and this container mounts none. Not /primary: the
# agent fences itself (read-only, 503 there) at the start of a hand-over,
# long before the lock has moved. An agent older than /lock answers 404:
# then its GET /status ("holds_lock"), which it served to anyone. Only bash
# built-ins (its /dev/tcp) and sleep: the server images have no curl.
#
# Exit status: 0 when the lock is not held (or the agent is gone), 1 when it
# gave up; the kubelet then records a FailedPreStopHook Event and stops
# mysqld anyway, and the agent, seeing its mysqld gone, releases the lock.
# Tested by deploy/scripts_test.go against an HTTP server that plays the agent.

limit=${1:-${MYSQLHA_HANDOVER_WAIT_SECONDS:-45}}
port=${MYSQLHA_API_PORT:-8008}
if [[ ! $limit =~ ^[0-9]+$ || ! $port =~ ^[0-9]+$ ]]; then
	echo "prestop-wait: bad limit \"$limit\" or port \"$port\"" >&2
	exit 1
fi

# lock_state prints held, free, gone (nothing listens: the agent has exited)
# or unknown (no complete answer: a stalled agent, which may be in the middle
# of a hand-over, so it is waited for like a holder).
lock_state() {
	local resp
	# Connecting to a port nobody listens on fails at once: the agent has exited.
	if ! resp=$(get /lock); then
		echo gone
		return
	fi
	if [[ $resp =~ ^HTTP/1\.[01]\ 404 ]] && ! resp=$(get /status); then
		echo gone
		return
	fi
	if [[ $resp =~ ^HTTP/1\.[01]\ 200 && ! $resp =~ \"holds_lock\":[[:space:]]*false ]]; then
		echo held
	elif [[ $resp =~ ^HTTP/1\.[01]\ 503 || $resp =~ ^HTTP/1\.[01]\ 200 && $resp =~ \"holds_lock\":[[:space:]]*false ]]; then
		echo free
	else
		echo unknown
	fi
}

# get PATH prints the agent's whole answer to GET PATH; it fails when
# nothing listens.
get() {
	local resp="" line=""
	{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3
	# read -t bounds a stalled (say, frozen) agent to 2 s per line.
	while IFS= read -r -t 2 line <&3 || [[ -n $line ]]; do
		resp+=$line$'\n'
		line=""
	done
	exec 3<&-
	printf '%s' "$resp"
}

# Microseconds since the epoch: $SECONDS counts whole seconds from wherever
# the current second began, so a bound measured with it could end up to a
# second early (found by TestPreStopWait: gave up after 2.04 s of 3).
now_us() { echo "${EPOCHREALTIME//[.,]/}"; } # the separator follows the locale
start=$(now_us)
while :; do
	state=$(lock_state)
	elapsed=$((($(now_us) - start) / 1000000))
	if [[ $state == free || $state == gone ]]; then
		echo "prestop-wait: leader lock $state after ${elapsed}s"
		exit 0
	fi
	if (($(now_us) - start >= limit * 1000000)); then
		echo "prestop-wait: leader lock still $state after ${limit}s; stopping mysqld anyway" >&2
		exit 1
	fi
	sleep 1
done
