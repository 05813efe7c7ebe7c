#!/bin/bash
# mysqlha-cnf.sh DIR: writes DIR/mysqlha.cnf, this member's server settings.
#
# Run by the init container of every database pod (same image as the server,
# so bash and coreutils are all it needs); DIR is the emptyDir that the server
# container mounts at /etc/mysql/conf.d/, which both the official images and
# ours include. Tested by deploy/scripts_test.go, which also starts a real
# MariaDB with the file it writes.
#
# Why a generated file: every member needs its own server_id (replicas skip
# events that carry their own id, so the image's default of 1 everywhere
# silently loses writes), derived here from the StatefulSet ordinal:
# server_id = MYSQLHA_SERVER_ID_BASE + ordinal, mysqlha-2 -> 102.
#
# That id belongs to the member's data, not to its name: a member that comes
# back with an empty data directory (a lost volume, an emptyDir) and took the
# old id would skip every transaction its predecessor wrote as primary, so
# replication breaks at the first row of a table it never created (seen on
# the test node). So the id is kept in the data directory
# (mysqlha-server-id); a data directory without one that is already
# initialised keeps base + ordinal (upgrades), and an empty one gets a new
# id, base + ordinal + 1000 * random, which still ends in the ordinal.
#
# Environment:
#   HOSTNAME                       pod name, <statefulset>-<ordinal> (set by the runtime)
#   MYSQLHA_FLAVOR                 mariadb (default) or mysql (MySQL 8.4)
#   MYSQLHA_SERVER_ID_BASE         default 100
#   MYSQLHA_REPORT_HOST            what replicas report to their source (SHOW REPLICAS); default HOSTNAME
#   MYSQLHA_BIND_ADDRESS           default 0.0.0.0 (:: for IPv6 clusters)
#   MYSQLHA_BINLOG_EXPIRE_SECONDS  binary log retention, default 604800 (7 days)
#   MYSQLHA_DATADIR                default /var/lib/mysql: holds mysqlha-server-id (and, for MySQL,
#                                  decides super_read_only, below)
#   MYSQLHA_EXTRA_CNF              lines appended verbatim to [mysqld], e.g. innodb_buffer_pool_size
set -euo pipefail

die() {
	echo "mysqlha-cnf: $*" >&2
	exit 1
}

dir=${1:-}
[[ -n $dir && -d $dir ]] || die "usage: mysqlha-cnf.sh DIR (an existing directory)"
name=${HOSTNAME:-}
ordinal=${name##*-}
[[ $name == *-* && $ordinal =~ ^[0-9]+$ ]] ||
	die "HOSTNAME=\"$name\" is not <statefulset>-<ordinal>; cannot derive server_id"
base=${MYSQLHA_SERVER_ID_BASE:-100}
expire=${MYSQLHA_BINLOG_EXPIRE_SECONDS:-604800}
[[ $base =~ ^[0-9]+$ ]] || die "MYSQLHA_SERVER_ID_BASE=\"$base\" is not a number"
[[ $expire =~ ^[0-9]+$ ]] || die "MYSQLHA_BINLOG_EXPIRE_SECONDS=\"$expire\" is not a number"
report_host=${MYSQLHA_REPORT_HOST:-$name}
bind=${MYSQLHA_BIND_ADDRESS:-0.0.0.0}
datadir=${MYSQLHA_DATADIR:-/var/lib/mysql}
idfile=$datadir/mysqlha-server-id
if [[ -e $idfile ]]; then
	server_id=$(<"$idfile")
	[[ $server_id =~ ^[0-9]+$ ]] || die "$idfile holds \"$server_id\", not a server_id: fix or remove it"
elif [[ -e $datadir/mysql ]]; then
	server_id=$((base + 10#$ordinal))
else
	server_id=$((base + 10#$ordinal + 1000 * (SRANDOM % 4000000 + 1)))
fi
((server_id >= 1 && server_id <= 4294967295)) || die "server_id $server_id out of range 1..4294967295"
if [[ ! -e $idfile ]]; then
	echo "$server_id" >"$idfile.tmp" && mv -f "$idfile.tmp" "$idfile" ||
		die "cannot record server_id in $idfile: the data volume must be writable by the init container"
fi

common="server_id = $server_id
report_host = $report_host
report_port = 3306
port = 3306
bind_address = $bind
socket = /run/mysqld/mysqld.sock
# Clients are authenticated by address, never by a reverse DNS lookup.
skip_name_resolve = ON
host_cache_size = 0
# Binary log with GTIDs: every member can become the source.
log_bin = mysql-bin
relay_log = relay-bin
binlog_expire_logs_seconds = $expire
# Durable commits: an acknowledged transaction survives a crash of the pod,
# so a promoted replica never lacks what the old source acknowledged.
sync_binlog = 1
innodb_flush_log_at_trx_commit = 1
# The dead-man switch (an event the agent keeps pushing back) fences this
# server at the lock deadline when its agent is dead; the agent refuses to
# make a server without a running event scheduler writable. MariaDB's
# default is OFF, and switching it on at run time needs SUPER.
event_scheduler = ON"

case ${MYSQLHA_FLAVOR:-mariadb} in
mariadb)
	flavor="gtid_domain_id = 0
gtid_strict_mode = ON
log_slave_updates = ON
binlog_format = ROW
# Never writable until the agent holds the leader lock and clears it.
read_only = ON
# Replication starts only when the agent has chosen the source.
skip_slave_start = ON"
	;;
mysql)
	# binlog_format is ROW by default and deprecated in 8.4: not set.
	# super_read_only also stops root, and the image's first-start set-up
	# (root password, the initdb scripts) writes as root: on an empty data
	# directory it is left to the agent, which sets it before anything else
	# when it starts (read_only stops every other user meanwhile).
	sro="super_read_only = ON"
	if [[ ! -e $datadir/mysql ]]; then
		sro="# super_read_only: set by the agent (empty data directory: the image initialises it first)"
	fi
	flavor="gtid_mode = ON
enforce_gtid_consistency = ON
log_replica_updates = ON
# Never writable until the agent holds the leader lock and clears it.
read_only = ON
$sro
# Replication starts only when the agent has chosen the source.
skip_replica_start = ON
# Semi-sync plugins loaded here, so that the agent needs no INSERT on mysql.plugin.
plugin_load_add = semisync_source.so
plugin_load_add = semisync_replica.so"
	;;
*)
	die "MYSQLHA_FLAVOR=\"$MYSQLHA_FLAVOR\": want mariadb or mysql"
	;;
esac

tmp=$dir/.mysqlha.cnf.tmp
{
	echo "# Written by mysqlha-cnf.sh for $name at pod start; do not edit."
	echo "[mysqld]"
	echo "$common"
	echo "$flavor"
	if [[ -n ${MYSQLHA_EXTRA_CNF:-} ]]; then
		echo "# MYSQLHA_EXTRA_CNF"
		echo "$MYSQLHA_EXTRA_CNF"
	fi
} >"$tmp"
mv -f "$tmp" "$dir/mysqlha.cnf"
echo "mysqlha-cnf: wrote $dir/mysqlha.cnf (server_id $server_id, ${MYSQLHA_FLAVOR:-mariadb})"
