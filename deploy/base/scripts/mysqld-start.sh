#!/bin/bash
# mysqld-start.sh COMMAND [ARGS...]: the database container's command. Runs
# COMMAND (the image's entrypoint and server: docker-entrypoint.sh mariadbd)
# in its place, unless agentctl reinit is swapping the data directory.
#
# Why: a rebuild stages the donor's backup beside the data, writes the
# marker <datadir>/.mysqlha-reinit, shuts mysqld down and renames the new
# files in; it removes the marker last. The kubelet restarts this container
# as soon as mysqld exits, and a server started before the swap is complete
# would open half of the old data and half of the new. So: wait while the
# marker exists. It stays only as long as the agent needs for the renames;
# an agent that crashes mid-swap resumes the swap when it restarts.
#
# Environment: MYSQLHA_DATADIR (default /var/lib/mysql), the data directory.
# Tested by deploy/scripts_test.go.

datadir=${MYSQLHA_DATADIR:-/var/lib/mysql}
marker=$datadir/.mysqlha-reinit
if (($# == 0)); then
	echo "mysqld-start: no command: give the image's entrypoint and server, e.g. docker-entrypoint.sh mariadbd" >&2
	exit 2
fi
waited=0
while [[ -e $marker ]]; do
	if ((waited % 30 == 0)); then
		echo "mysqld-start: $marker exists: the agent is swapping in a rebuilt data directory (agentctl reinit); mysqld starts once it is done (waited ${waited}s)" >&2
	fi
	sleep 1
	waited=$((waited + 1))
done
exec "$@"
