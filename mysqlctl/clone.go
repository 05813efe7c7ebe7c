package mysqlctl

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Rebuilding a member (agentctl reinit) needs a few statements besides the
// backup itself. MariaDB's backup is mariabackup (package backup) and these
// only bracket it; MySQL copies the data with the CLONE plugin, in SQL.
// MySQL's statements are pinned by unit tests only: no MySQL server can run
// in this project's test environment.

// CloneDonor is where a MySQL recipient clones from.
type CloneDonor struct {
	Host string
	Port int
	// User needs BACKUP_ADMIN on the donor.
	User, Password string
}

// Datadir reads the server's data directory: SELECT @@datadir.
func (d Dialect) Datadir() Statement { return stmt("SELECT @@datadir") }

// Shutdown stops the server cleanly: SHUTDOWN (both flavors; needs the
// SHUTDOWN privilege).
func (d Dialect) Shutdown() Statement { return stmt("SHUTDOWN") }

// Uptime reads how long the server has run: SHOW GLOBAL STATUS LIKE
// 'Uptime' (both flavors). A restart (agentctl restart) compares it with
// the request's time to tell a restart already done from one to do.
func (d Dialect) Uptime() Statement { return stmt("SHOW GLOBAL STATUS LIKE 'Uptime'") }

// SetReplicaPosition makes a rebuilt replica resume after the backup's
// consistent point. MariaDB does not keep the donor's binary logs in a
// backup, so gtid_slave_pos is set from the position mariabackup recorded,
// and the binlog state (one GTID per server that ever wrote, which errant
// checks compare) from binlogState (gtid.RestoredBinlogState), on a binary
// log emptied first: MariaDB accepts a new state only on an empty one. A
// MySQL clone carries gtid_executed along and needs nothing.
func (d Dialect) SetReplicaPosition(gtidPos, binlogState string) []Statement {
	if !d.mariaDB() {
		return nil
	}
	out := []Statement{d.StopReplica()}
	if binlogState != "" {
		out = append(out, d.ResetBinaryLogs(), stmt("SET GLOBAL gtid_binlog_state = ?", binlogState))
	}
	return append(out, stmt("SET GLOBAL gtid_slave_pos = ?", gtidPos))
}

// CloneFrom copies donor's data over this server's (MySQL 8.0.17+), which
// then restarts itself when a supervisor runs it (mysqld_safe, systemd, a
// container restart):
//
//	INSTALL PLUGIN clone SONAME 'mysql_clone.so'   (error 1125 if loaded: ignored)
//	SET GLOBAL clone_valid_donor_list = 'host:port'
//	CLONE INSTANCE FROM 'user'@'host':port IDENTIFIED BY 'password'
//
// MariaDB has no CLONE: ErrUnsupported (use package backup).
func (d Dialect) CloneFrom(donor CloneDonor) ([]Statement, error) {
	if d.mariaDB() {
		return nil, fmt.Errorf("%w: MariaDB has no CLONE plugin; rebuild with mariabackup", ErrUnsupported)
	}
	addr := fmt.Sprintf("%s:%d", donor.Host, donor.Port)
	return []Statement{
		d.InstallClonePlugin(),
		stmt("SET GLOBAL clone_valid_donor_list = ?", addr),
		stmt("CLONE INSTANCE FROM ?@?:? IDENTIFIED BY ?", donor.User, donor.Host, donor.Port, donor.Password),
	}, nil
}

// InstallClonePlugin loads the clone plugin, which a MySQL donor needs too.
func (d Dialect) InstallClonePlugin() Statement {
	return stmt("INSTALL PLUGIN clone SONAME 'mysql_clone.so'")
}

// erUDFExists is MySQL's answer to INSTALL PLUGIN of a loaded plugin:
// "Function 'clone' already exists".
const erUDFExists = 1125

// Datadir returns @@datadir.
func (i *Instance) Datadir(ctx context.Context) (string, error) {
	var dir string
	s := i.dialect.Datadir()
	if err := i.db.QueryRowContext(ctx, s.SQL, s.Args...).Scan(&dir); err != nil {
		return "", i.wrap("reading datadir", err)
	}
	return dir, nil
}

// Shutdown stops the server with SHUTDOWN. The connection may drop before
// the reply: that is success.
func (i *Instance) Shutdown(ctx context.Context) error {
	s := i.dialect.Shutdown()
	if _, err := i.db.ExecContext(ctx, s.SQL, s.Args...); err != nil && !isConnectionLost(err) {
		return i.wrap("shutting down", err)
	}
	return nil
}

// Uptime returns how long the server has run, to the second.
func (i *Instance) Uptime(ctx context.Context) (time.Duration, error) {
	var name string
	var secs int64
	s := i.dialect.Uptime()
	if err := i.db.QueryRowContext(ctx, s.SQL, s.Args...).Scan(&name, &secs); err != nil {
		return 0, i.wrap("reading uptime", err)
	}
	return time.Duration(secs) * time.Second, nil
}

// SetReplicaPosition runs Dialect.SetReplicaPosition.
func (i *Instance) SetReplicaPosition(ctx context.Context, gtidPos, binlogState string) error {
	return i.execIgnoringNotReplica(ctx, "setting replica position", i.dialect.SetReplicaPosition(gtidPos, binlogState)...)
}

// CloneFrom runs Dialect.CloneFrom on this (MySQL) server.
func (i *Instance) CloneFrom(ctx context.Context, donor CloneDonor) error {
	stmts, err := i.dialect.CloneFrom(donor)
	if err != nil {
		return err
	}
	if _, err := i.db.ExecContext(ctx, stmts[0].SQL); err != nil && !isErrno(err, erUDFExists) {
		return i.wrap("installing clone plugin", err)
	}
	return i.exec(ctx, "cloning from "+donor.Host, stmts[1:]...)
}

// isConnectionLost: SHUTDOWN may close the connection before its reply.
func isConnectionLost(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF)
}
