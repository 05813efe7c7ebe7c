#!/bin/bash
# docker-entrypoint.sh of the mysqlha e2e MariaDB 10.11 image (Debian bookworm
# packages). It re-implements, independently, the part of the official
# mariadb:10.11 image's entrypoint that mysqlha's manifests rely on, so that
# deploy/ runs unchanged on either image. The contract, including what is
# not supported, is in the doc comment of MariaDB in e2e/images/mariadb.go.
#
# On `mariadbd [args]` (or args starting with '-'): when the datadir has no
# `mysql` database it initialises it (mariadb-install-db), starts a temporary
# server on the unix socket only, sets the root password, loads the time
# zones, creates MARIADB_DATABASE/MARIADB_USER, runs
# /docker-entrypoint-initdb.d/*, stops the server; then it execs mariadbd.
# Any other command is exec'd as is.
set -eo pipefail
shopt -s nullglob

mysql_log() {
	local type="$1"
	shift
	printf '%s [%s] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$type" "$*"
}
mysql_note() { mysql_log Note "$@"; }
mysql_warn() { mysql_log Warn "$@" >&2; }
mysql_error() {
	mysql_log ERROR "$@" >&2
	exit 1
}

# file_env VAR [DEFAULT]: VAR from $VAR or from the file named by $VAR_FILE
# (never both), exported; VAR_FILE is unset.
file_env() {
	local var="$1" def="${2:-}"
	local fileVar="${var}_FILE"
	if [ -n "${!var:-}" ] && [ -n "${!fileVar:-}" ]; then
		mysql_error "Both $var and $fileVar are set (but are exclusive)"
	fi
	local val="$def"
	if [ -n "${!var:-}" ]; then
		val="${!var}"
	elif [ -n "${!fileVar:-}" ]; then
		val="$(<"${!fileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

# _mariadb_file_env MYSQL_X [DEFAULT]: MARIADB_X and MYSQL_X (or their _FILE)
# are aliases; MARIADB_X wins; both end up exported with the same value.
_mariadb_file_env() {
	local var="$1"
	shift
	local maria="MARIADB_${var#MYSQL_}"
	file_env "$var" "$@"
	file_env "$maria" "${!var}"
	if [ -n "${!maria:-}" ]; then
		export "$var"="${!maria}"
	fi
}

_is_sourced() {
	[ "${#FUNCNAME[@]}" -ge 2 ] && [ "${FUNCNAME[0]}" = '_is_sourced' ] && [ "${FUNCNAME[1]}" = 'source' ]
}

# _mysql_want_help ARGS: true when mariadbd would only print and exit.
_mysql_want_help() {
	local arg
	for arg; do
		case "$arg" in
		-'?' | --help | --print-defaults | -V | --version) return 0 ;;
		esac
	done
	return 1
}

# mysql_check_config MARIADBD ARGS: fails with mariadbd's message on a bad
# option or configuration.
mysql_check_config() {
	local errors
	if ! errors="$("$@" --verbose --help 2>&1 >/dev/null)"; then
		mysql_error $'mariadbd failed while attempting to check config\n\tcommand was: '"$* --verbose --help"$'\n\t'"$errors"
	fi
}

# mysql_get_config NAME MARIADBD ARGS: the value of NAME (datadir, socket,
# port...) the server would run with, defaults and config files included.
mysql_get_config() {
	local conf="$1"
	shift
	"$@" --verbose --help 2>/dev/null |
		awk -v conf="$conf" '$1 == conf && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}

# docker_setup_env MARIADBD ARGS: checks the server configuration (one run
# of `mariadbd --verbose --help`, which fails on a bad option) and sets
# DATADIR, SOCKET and PORT from it, then the MARIADB_* variables.
docker_setup_env() {
	local help
	if ! help="$("$@" --verbose --help 2>&1)"; then
		mysql_error $'mariadbd failed while attempting to check config\n\tcommand was: '"$* --verbose --help"$'\n\t'"$help"
	fi
	declare -g DATADIR SOCKET PORT
	# "datadir    /var/lib/mysql/" in the variables table, not "--datadir=..." lines
	_conf() { awk -v conf="$1" '$1 == conf && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }' <<<"$help"; }
	DATADIR="$(_conf datadir)"
	SOCKET="$(_conf socket)"
	PORT="$(_conf port)"
	DATADIR="${DATADIR%/}"
	if [ -z "$DATADIR" ] || [ -z "$SOCKET" ]; then
		mysql_error "could not read datadir and socket from mariadbd --verbose --help"
	fi

	_mariadb_file_env 'MYSQL_ROOT_HOST' '%'
	_mariadb_file_env 'MYSQL_DATABASE'
	_mariadb_file_env 'MYSQL_USER'
	_mariadb_file_env 'MYSQL_PASSWORD'
	_mariadb_file_env 'MYSQL_ROOT_PASSWORD'
	: "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:=${MYSQL_ALLOW_EMPTY_PASSWORD:-}}"
	export MYSQL_ALLOW_EMPTY_PASSWORD="$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" MARIADB_ALLOW_EMPTY_ROOT_PASSWORD
	: "${MARIADB_RANDOM_ROOT_PASSWORD:=${MYSQL_RANDOM_ROOT_PASSWORD:-}}"
	export MYSQL_RANDOM_ROOT_PASSWORD="$MARIADB_RANDOM_ROOT_PASSWORD" MARIADB_RANDOM_ROOT_PASSWORD
	: "${MARIADB_INITDB_SKIP_TZINFO:=${MYSQL_INITDB_SKIP_TZINFO:-}}"
	export MYSQL_INITDB_SKIP_TZINFO="$MARIADB_INITDB_SKIP_TZINFO" MARIADB_INITDB_SKIP_TZINFO

	declare -g DATABASE_ALREADY_EXISTS=
	if [ -d "$DATADIR/mysql" ]; then
		DATABASE_ALREADY_EXISTS='true'
	fi
}

# docker_reject_unsupported: settings of the official image this one does
# not implement fail loudly instead of being silently ignored.
docker_reject_unsupported() {
	local var fileVar
	for var in MARIADB_ROOT_PASSWORD_HASH MARIADB_PASSWORD_HASH MARIADB_REPLICATION_USER \
		MARIADB_REPLICATION_PASSWORD MARIADB_REPLICATION_PASSWORD_HASH MARIADB_MASTER_HOST \
		MARIADB_MYSQL_LOCALHOST_USER MARIADB_HEALTHCHECK_GRANTS; do
		fileVar="${var}_FILE"
		if [ -n "${!var:-}" ] || [ -n "${!fileVar:-}" ]; then
			mysql_error "$var is not supported by this image (mysqlha e2e MariaDB); use the official mariadb image for it"
		fi
	done
	if [ -n "${MARIADB_AUTO_UPGRADE:-}" ]; then
		mysql_warn "MARIADB_AUTO_UPGRADE is ignored: this image never runs mariadb-upgrade"
	fi
}

# docker_create_db_directories: the datadir exists; as root, it and the
# socket folder belong to mysql.
docker_create_db_directories() {
	mkdir -p "$DATADIR"
	if [ "$(id -u)" = 0 ]; then
		find "$DATADIR" \! -user mysql -exec chown mysql: '{}' +
		mkdir -p "${SOCKET%/*}"
		find "${SOCKET%/*}" -maxdepth 0 \! -user mysql -exec chown mysql: '{}' \;
	fi
}

# docker_verify_minimum_env: a new datadir needs a root password setting.
docker_verify_minimum_env() {
	if [ -z "$MARIADB_ROOT_PASSWORD" ] && [ -z "$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" ] && [ -z "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		mysql_error $'Database is uninitialized and password option is not specified\n\tYou need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD'
	fi
}

# docker_exec_client ARGS: the mariadb client as root on the socket, in
# MARIADB_DATABASE when set (ARGS can override it).
docker_exec_client() {
	if [ -n "$MARIADB_DATABASE" ]; then
		set -- --database="$MARIADB_DATABASE" "$@"
	fi
	mariadb --protocol=socket -uroot -hlocalhost --socket="$SOCKET" "$@"
}

# docker_process_sql [--dont-use-mysql-root-password] [client args]: runs
# the SQL on stdin as root through the socket, with MARIADB_ROOT_PASSWORD
# (passed as MYSQL_PWD, never on the command line).
#   docker_process_sql --database=mydb <<<'INSERT ...'
docker_process_sql() {
	if [ "$1" = '--dont-use-mysql-root-password' ]; then
		shift
		MYSQL_PWD='' docker_exec_client "$@"
	else
		MYSQL_PWD="$MARIADB_ROOT_PASSWORD" docker_exec_client "$@"
	fi
}

# docker_sql_escape_string_literal S: S escaped for a '...' SQL literal.
docker_sql_escape_string_literal() {
	local s="$1" nl=$'\n'
	s="${s//\\/\\\\}"
	s="${s//$nl/\\n}"
	printf '%s' "${s//\'/\\\'}"
}

# docker_temp_server_start MARIADBD ARGS: the server with the given args,
# reachable on the socket only, waited for (30 s at most).
docker_temp_server_start() {
	"$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --loose-wsrep-on=OFF \
		--expire-logs-days=0 --loose-innodb-buffer-pool-load-at-startup=0 &
	declare -g MARIADB_PID=$!
	mysql_note "Waiting for server startup"
	local extra=()
	if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
		extra=(--dont-use-mysql-root-password)
	fi
	local i
	for i in {300..0}; do
		if docker_process_sql "${extra[@]}" --database=mysql <<<'SELECT 1' &>/dev/null; then
			break
		fi
		if ! kill -0 "$MARIADB_PID" 2>/dev/null; then
			mysql_error "Temporary server exited during startup."
		fi
		sleep 0.1
	done
	if [ "$i" = 0 ]; then
		mysql_error "Unable to start server."
	fi
}

docker_temp_server_stop() {
	kill "$MARIADB_PID"
	wait "$MARIADB_PID"
}

# docker_init_database_dir MARIADBD ARGS: mariadb-install-db with the
# server's args (binary log off), run as mysql (_main switched from root).
# No --user=mysql: it makes mariadb-install-db chown the datadir, which fails
# for a non-root process on a volume owned by root with group fsGroup.
docker_init_database_dir() {
	mysql_note "Initializing database files"
	local installArgs=(--datadir="$DATADIR" --rpm --auth-root-authentication-method=normal)
	mariadb-install-db "${installArgs[@]}" "${@:2}" \
		--skip-test-db \
		--old-mode='UTF8_IS_UTF8MB3' \
		--default-time-zone=SYSTEM --enforce-storage-engine= \
		--skip-log-bin \
		--expire-logs-days=0 \
		--loose-innodb-buffer-pool-load-at-startup=0 \
		--loose-innodb-buffer-pool-dump-at-shutdown=0
	mysql_note "Database files initialized"
}

# docker_setup_db: time zones, root password and root@'%', database and user.
# The root accounts are not written to the binary log (as the official image).
docker_setup_db() {
	if [ -z "$MARIADB_INITDB_SKIP_TZINFO" ] && [ -d /usr/share/zoneinfo ]; then
		mariadb-tzinfo-to-sql --skip-write-binlog /usr/share/zoneinfo |
			docker_process_sql --dont-use-mysql-root-password --database=mysql
	fi
	if [ -n "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		MARIADB_ROOT_PASSWORD="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
		export MARIADB_ROOT_PASSWORD MYSQL_ROOT_PASSWORD="$MARIADB_ROOT_PASSWORD"
		mysql_note "GENERATED ROOT PASSWORD: $MARIADB_ROOT_PASSWORD"
	fi
	local rootPw
	rootPw="$(docker_sql_escape_string_literal "$MARIADB_ROOT_PASSWORD")"
	local rootCreate=
	if [ -n "$MARIADB_ROOT_HOST" ] && [ "$MARIADB_ROOT_HOST" != 'localhost' ]; then
		rootCreate="CREATE USER 'root'@'${MARIADB_ROOT_HOST}' IDENTIFIED BY '${rootPw}';
GRANT ALL ON *.* TO 'root'@'${MARIADB_ROOT_HOST}' WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@'${MARIADB_ROOT_HOST}' WITH GRANT OPTION;"
	fi
	local createDatabase= createUser= userGrants=
	if [ -n "$MARIADB_DATABASE" ]; then
		mysql_note "Creating database ${MARIADB_DATABASE}"
		createDatabase="CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
	fi
	if [ -n "$MARIADB_USER" ] && [ -n "$MARIADB_PASSWORD" ]; then
		mysql_note "Creating user ${MARIADB_USER}"
		createUser="CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$(docker_sql_escape_string_literal "$MARIADB_PASSWORD")';"
		if [ -n "$MARIADB_DATABASE" ]; then
			mysql_note "Giving user ${MARIADB_USER} access to schema ${MARIADB_DATABASE}"
			userGrants="GRANT ALL ON \`${MARIADB_DATABASE//_/\\_}\`.* TO '$MARIADB_USER'@'%';"
		fi
	fi
	mysql_note "Securing system users (equivalent to running mysql_secure_installation)"
	docker_process_sql --dont-use-mysql-root-password --database=mysql --binary-mode <<-EOSQL
		SET @orig_sql_log_bin= @@SESSION.SQL_LOG_BIN;
		SET @@SESSION.SQL_LOG_BIN=0;
		SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
		DROP USER IF EXISTS root@'127.0.0.1', root@'::1';
		EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname,'\'');
		SET PASSWORD FOR 'root'@'localhost'= PASSWORD('${rootPw}');
		${rootCreate}
		SET @@SESSION.SQL_LOG_BIN=@orig_sql_log_bin;
		${createDatabase}
		${createUser}
		${userGrants}
	EOSQL
}

# docker_process_init_files FILES: *.sh executed when executable (they get
# the exported environment) else sourced (they also get these functions and
# DATADIR, SOCKET, PORT); *.sql, *.sql.gz, *.sql.xz, *.sql.zst piped into
# docker_process_sql; anything else ignored with a warning.
docker_process_init_files() {
	# shellcheck disable=SC2034 # "${mysql[@]}" for scripts written for old images
	mysql=(docker_process_sql)
	echo
	local f
	for f; do
		case "$f" in
		*.sh)
			if [ -x "$f" ]; then
				mysql_note "$0: running $f"
				"$f"
			else
				mysql_note "$0: sourcing $f"
				# shellcheck disable=SC1090
				. "$f"
			fi
			;;
		*.sql)
			mysql_note "$0: running $f"
			docker_process_sql <"$f"
			echo
			;;
		*.sql.gz)
			mysql_note "$0: running $f"
			gunzip -c "$f" | docker_process_sql
			echo
			;;
		*.sql.xz)
			mysql_note "$0: running $f"
			xzcat "$f" | docker_process_sql
			echo
			;;
		*.sql.zst)
			mysql_note "$0: running $f"
			zstd -dc "$f" | docker_process_sql
			echo
			;;
		*) mysql_warn "$0: ignoring $f" ;;
		esac
		echo
	done
}

docker_mariadb_init() {
	ls /docker-entrypoint-initdb.d/ >/dev/null # fail early on an unreadable folder
	docker_init_database_dir "$@"
	mysql_note "Starting temporary server"
	docker_temp_server_start "$@"
	mysql_note "Temporary server started."
	docker_setup_db
	docker_process_init_files /docker-entrypoint-initdb.d/*
	mysql_note "Stopping temporary server"
	docker_temp_server_stop
	mysql_note "Temporary server stopped"
	echo
	mysql_note "MariaDB init process done. Ready for start up."
	echo
}

_main() {
	if [ "${1:0:1}" = '-' ]; then
		set -- mariadbd "$@"
	fi
	if { [ "$1" = 'mariadbd' ] || [ "$1" = 'mysqld' ]; } && ! _mysql_want_help "$@"; then
		mysql_note "Entrypoint script for MariaDB Server ${MARIADB_VERSION} started."
		docker_reject_unsupported
		docker_setup_env "$@"
		docker_create_db_directories
		if [ "$(id -u)" = 0 ]; then
			mysql_note "Switching to dedicated user 'mysql'"
			exec setpriv --reuid=mysql --regid=mysql --init-groups "${BASH_SOURCE[0]}" "$@"
		fi
		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			docker_verify_minimum_env
			docker_mariadb_init "$@"
		fi
	fi
	exec "$@"
}

if ! _is_sourced; then
	_main "$@"
fi
