# shellcheck shell=bash
# initdb-users.sh: creates the agent's and the replication user, once, when
# the server image initialises an empty data directory.
#
# Contract (the official mariadb and mysql images, and the repository's
# local test image): on the first start of an empty data directory the
# entrypoint runs a temporary server on its socket only, sets the root
# password, then *sources* every non-executable /docker-entrypoint-initdb.d/
# *.sh with the function docker_process_sql defined (a root client on that
# socket, reading SQL from stdin). This file is mounted without exec bits so
# that it is sourced: run as a program, it would not see docker_process_sql.
# It is sourced by a shell running with set -e, so it defines functions,
# calls it, and leaves no variables or functions behind; it never calls exit.
#
# The users are created with sql_log_bin=0: every member runs this on its own
# empty data directory, and logged, these statements would become a
# transaction of each member's own, which every other member would lack
# (errant GTIDs at the first failover). Re-running it is harmless (IF NOT
# EXISTS, ALTER USER sets the password again), e.g. to repair a member; it
# uses the passwords the container started with:
#   kubectl exec mysqlha-N -c mariadb -- bash -c 'docker_process_sql() { MYSQL_PWD="$(cat "$MARIADB_ROOT_PASSWORD_FILE")" mariadb -uroot "$@"; }; . /docker-entrypoint-initdb.d/50-mysqlha-users.sh'
#
# Environment (see statefulset.yaml):
#   MYSQLHA_AGENT_PASSWORD_FILE, MYSQLHA_REPL_PASSWORD_FILE   the files
#       holding the passwords (the Secret, mounted); or the passwords
#       themselves in MYSQLHA_AGENT_PASSWORD, MYSQLHA_REPL_PASSWORD
#   MYSQLHA_AGENT_USER (mysqlha), MYSQLHA_REPL_USER (repl)   as the agent's --mysql-user, --replication-user
#   MYSQLHA_FLAVOR   mariadb (default) or mysql: which privilege names to grant
#   MYSQLHA_LOAD_TZINFO=1   (mysql) load the time zone tables here, unlogged;
#       set together with MYSQL_INITDB_SKIP_TZINFO=1, because the mysql
#       image's own load is binlogged, which would give every member a GTID
#       history of its own (MariaDB's image loads them unlogged already)
#
# The agent's privileges are the README's ("Privileges of the agent's MySQL
# user"); deploy/scripts_test.go checks the MariaDB ones against a live
# server and the grants the integration tests run with.

# mysqlha_secret prints the value of the variable named $1, or the content
# of the file $1_FILE names (without its final newline).
mysqlha_secret() {
	local file_var="${1}_FILE"
	if [[ -n ${!file_var:-} ]]; then
		if [[ ! -r ${!file_var} ]]; then
			echo "initdb-users: $file_var=${!file_var}: cannot read the file (is the Secret mounted?)" >&2
			return 1
		fi
		local v
		v=$(<"${!file_var}")
		printf '%s' "$v"
		return 0
	fi
	printf '%s' "${!1:-}"
}

mysqlha_create_users() {
	local flavor=${MYSQLHA_FLAVOR:-mariadb}
	local agent_user=${MYSQLHA_AGENT_USER:-mysqlha} repl_user=${MYSQLHA_REPL_USER:-repl}
	local agent_pw repl_pw
	agent_pw=$(mysqlha_secret MYSQLHA_AGENT_PASSWORD) || return 1
	repl_pw=$(mysqlha_secret MYSQLHA_REPL_PASSWORD) || return 1
	local agent_grants u probe_user=""
	case $flavor in
	mariadb)
		# The probes (mariadb-admin ping, as the image's uid 999, "mysql")
		# log in over the socket: an account for it, with no privilege,
		# keeps every probe from logging "Access denied" in the error log.
		probe_user="CREATE USER IF NOT EXISTS 'mysql'@'localhost' IDENTIFIED VIA unix_socket;"
		agent_grants="SELECT, RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN, REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, SHUTDOWN"
		;;
	mysql)
		# SHUTDOWN: agentctl restart.
		agent_grants="SYSTEM_VARIABLES_ADMIN, CONNECTION_ADMIN, REPLICATION_SLAVE_ADMIN, REPLICATION CLIENT, PROCESS, RELOAD, SHUTDOWN"
		;;
	*)
		echo "initdb-users: MYSQLHA_FLAVOR=\"$flavor\": want mariadb or mysql" >&2
		return 1
		;;
	esac
	if [[ -z $agent_pw || -z $repl_pw ]]; then
		echo "initdb-users: MYSQLHA_AGENT_PASSWORD_FILE and MYSQLHA_REPL_PASSWORD_FILE (or MYSQLHA_AGENT_PASSWORD and MYSQLHA_REPL_PASSWORD) must be set (from the Secret)" >&2
		return 1
	fi
	for u in "$agent_user" "$repl_user"; do
		if [[ ! $u =~ ^[A-Za-z0-9_]{1,32}$ ]]; then
			echo "initdb-users: user name \"$u\": only letters, digits and _ (at most 32)" >&2
			return 1
		fi
	done
	# A string literal: backslashes and quotes escaped (the session clears
	# NO_BACKSLASH_ESCAPES, so backslash escaping applies).
	local q_agent q_repl
	q_agent=${agent_pw//\\/\\\\}
	q_agent=${q_agent//\'/\\\'}
	q_repl=${repl_pw//\\/\\\\}
	q_repl=${q_repl//\'/\\\'}
	if ! declare -F docker_process_sql >/dev/null; then
		echo "initdb-users: docker_process_sql is not defined: this file is to be sourced by the image's entrypoint" >&2
		return 1
	fi
	if [[ $flavor == mysql && ${MYSQLHA_LOAD_TZINFO:-} == 1 ]]; then
		# The sed is the mysql image's own (MySQL bug 20545).
		{
			echo "SET SESSION sql_log_bin = 0;"
			mysql_tzinfo_to_sql /usr/share/zoneinfo | sed 's/Local time zone must be set--see zic manual page/FCTY/'
		} | docker_process_sql --database=mysql || return 1
	fi
	# The SQL goes through stdin: passwords never appear in a command line.
	docker_process_sql <<-EOSQL || return 1
		SET SESSION sql_log_bin = 0;
		SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '');
		CREATE USER IF NOT EXISTS '$agent_user'@'%' IDENTIFIED BY '$q_agent';
		ALTER USER '$agent_user'@'%' IDENTIFIED BY '$q_agent';
		GRANT $agent_grants ON *.* TO '$agent_user'@'%';
		GRANT CREATE, EVENT ON mysqlha.* TO '$agent_user'@'%';
		CREATE USER IF NOT EXISTS '$repl_user'@'%' IDENTIFIED BY '$q_repl';
		ALTER USER '$repl_user'@'%' IDENTIFIED BY '$q_repl';
		GRANT REPLICATION SLAVE ON *.* TO '$repl_user'@'%';
		$probe_user
	EOSQL
	echo "initdb-users: users $agent_user and $repl_user ready ($flavor, not binlogged)"
}

mysqlha_create_users
unset -f mysqlha_create_users mysqlha_secret
