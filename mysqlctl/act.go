package mysqlctl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

const (
	erLockWaitTimeout  = 1205
	erReplicaNotConfig = 1200 // "The server is not configured as slave"
)

func isErrno(err error, n uint16) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == n
}

// Unfence makes the server writable:
//
//	MySQL:   SET GLOBAL super_read_only = OFF; SET GLOBAL read_only = OFF
//	MariaDB: SET GLOBAL read_only = OFF
func (i *Instance) Unfence(ctx context.Context) error {
	return i.exec(ctx, "unfencing", i.dialect.Unfence()...)
}

// StopReplication stops both replication threads (STOP REPLICA | STOP SLAVE).
// It succeeds on a server that is not a replica.
func (i *Instance) StopReplication(ctx context.Context) error {
	return i.execIgnoringNotReplica(ctx, "stopping replication", i.dialect.StopReplica())
}

// StopReplicationIO stops only the receiver, so the server acknowledges
// nothing more from its source while it applies what it has
// (STOP REPLICA IO_THREAD | STOP SLAVE IO_THREAD).
func (i *Instance) StopReplicationIO(ctx context.Context) error {
	return i.execIgnoringNotReplica(ctx, "stopping replication receiver", i.dialect.StopReplicaIOThread())
}

// StartReplication starts both threads (START REPLICA | START SLAVE).
func (i *Instance) StartReplication(ctx context.Context) error {
	return i.exec(ctx, "starting replication", i.dialect.StartReplica())
}

// ResetReplication stops replication and forgets the source:
//
//	MySQL:   STOP REPLICA; RESET REPLICA ALL
//	MariaDB: STOP SLAVE; RESET SLAVE ALL
func (i *Instance) ResetReplication(ctx context.Context) error {
	return i.execIgnoringNotReplica(ctx, "resetting replication", i.dialect.StopReplica(), i.dialect.ResetReplicaAll())
}

func (i *Instance) execIgnoringNotReplica(ctx context.Context, op string, stmts ...Statement) error {
	for _, s := range stmts {
		if _, err := i.db.ExecContext(ctx, s.SQL, s.Args...); err != nil && !isErrno(err, erReplicaNotConfig) {
			return i.wrap(op, err)
		}
	}
	return nil
}

// ReplicateFrom points the server at src with GTID auto-positioning and
// starts replication:
//
//	MySQL:   STOP REPLICA; CHANGE REPLICATION SOURCE TO SOURCE_HOST=?, ..., SOURCE_AUTO_POSITION=1; START REPLICA
//	MariaDB: STOP SLAVE; SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos (when the binlog has any);
//	         CHANGE MASTER TO MASTER_HOST=?, ..., MASTER_USE_GTID=slave_pos; START SLAVE
func (i *Instance) ReplicateFrom(ctx context.Context, src Source) error {
	if err := src.Validate(); err != nil {
		return err
	}
	if err := i.StopReplication(ctx); err != nil {
		return err
	}
	op := fmt.Sprintf("pointing replication at %s:%d", src.Host, src.Port)
	if align := i.dialect.AlignReplicaPosition(); len(align) > 0 {
		st, err := i.Status(ctx)
		if err != nil {
			return err
		}
		if st.GTIDExecuted != "" && st.GTIDExecuted != st.GTIDSlavePos {
			if err := i.exec(ctx, op, align...); err != nil {
				return err
			}
		}
	}
	return i.exec(ctx, op, i.dialect.ChangeSource(src), i.dialect.StartReplica())
}

// ValidateGTID checks that set is well-formed for this server's flavor.
func (i *Instance) ValidateGTID(set string) error {
	var err error
	if i.dialect.mariaDB() {
		_, err = gtid.ParseMariaDBPos(set)
	} else {
		_, err = gtid.ParseSet(set)
	}
	return err
}

// WaitForGTID blocks until the server has executed set, or fails with
// ErrTimeout after timeout:
//
//	MySQL:   SELECT WAIT_FOR_EXECUTED_GTID_SET(set, seconds)   -- 1 means timed out
//	MariaDB: SELECT MASTER_GTID_WAIT(pos, seconds)             -- -1 means timed out
//
// The wait runs in slices shorter than the read timeout, so a long wait is not
// mistaken for a dead server.
func (i *Instance) WaitForGTID(ctx context.Context, set string, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("%w: wait timeout %s must be positive", ErrInvalidConfig, timeout)
	}
	if err := i.ValidateGTID(set); err != nil {
		return fmt.Errorf("waiting for GTID set on %s: %w", i.cfg.Addr, err)
	}
	if set == "" {
		return nil
	}
	deadline := time.Now().Add(timeout)
	slice := max(i.cfg.ReadTimeout-time.Second, 500*time.Millisecond)
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return fmt.Errorf("waiting on %s for %s: %w after %s", i.cfg.Addr, set, ErrTimeout, timeout)
		}
		s, timedOut := i.dialect.WaitForGTID(set, min(remaining, slice))
		var result sql.NullInt64
		if err := i.db.QueryRowContext(ctx, s.SQL, s.Args...).Scan(&result); err != nil {
			return i.wrap("waiting for GTID set", err)
		}
		if !result.Valid {
			return fmt.Errorf("waiting on %s for %s: server returned NULL (is GTID mode on?)", i.cfg.Addr, set)
		}
		if result.Int64 != timedOut {
			return nil
		}
	}
}

// SetSemiSyncSource switches source-side semi-sync; only the primary may have
// it on. On MySQL it loads the rpl_semi_sync_source plugin first if needed:
//
//	MySQL:   INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so';
//	         SET GLOBAL rpl_semi_sync_source_timeout = ms;
//	         SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = n;
//	         SET GLOBAL rpl_semi_sync_source_enabled = ON|OFF
//	MariaDB: SET GLOBAL rpl_semi_sync_master_timeout = ms; SET GLOBAL rpl_semi_sync_master_enabled = ON|OFF
func (i *Instance) SetSemiSyncSource(ctx context.Context, enabled bool, timeout time.Duration, waitForReplicas int) error {
	if source, _, needed := i.dialect.SemiSyncPlugins(); needed {
		if !enabled {
			if loaded, err := i.pluginLoaded(ctx, source[0]); err != nil || !loaded {
				return err
			}
		} else if err := i.ensurePlugin(ctx, source); err != nil {
			return err
		}
	}
	return i.exec(ctx, "setting source semi-sync", i.dialect.SemiSyncSource(enabled, timeout, waitForReplicas)...)
}

// SetSemiSyncReplica switches replica-side semi-sync and, when the setting
// changed on a running replica, restarts the IO thread so it takes effect:
//
//	MySQL:   INSTALL PLUGIN rpl_semi_sync_replica SONAME 'semisync_replica.so';
//	         SET GLOBAL rpl_semi_sync_replica_enabled = ON|OFF; STOP REPLICA IO_THREAD; START REPLICA IO_THREAD
//	MariaDB: SET GLOBAL rpl_semi_sync_slave_enabled = ON|OFF; STOP SLAVE IO_THREAD; START SLAVE IO_THREAD
func (i *Instance) SetSemiSyncReplica(ctx context.Context, enabled bool) error {
	if _, replica, needed := i.dialect.SemiSyncPlugins(); needed {
		if !enabled {
			if loaded, err := i.pluginLoaded(ctx, replica[0]); err != nil || !loaded {
				return err
			}
		} else if err := i.ensurePlugin(ctx, replica); err != nil {
			return err
		}
	}
	st, err := i.Status(ctx)
	if err != nil {
		return err
	}
	if st.SemiSync.ReplicaEnabled == enabled {
		return nil
	}
	if err := i.exec(ctx, "setting replica semi-sync", i.dialect.SemiSyncReplica(enabled)); err != nil {
		return err
	}
	r, err := i.replicaStatus(ctx)
	if err != nil || r == nil || r.IOThread == ThreadStopped {
		return err
	}
	return i.exec(ctx, "restarting replication receiver", i.dialect.StopReplicaIOThread(), i.dialect.StartReplicaIOThread())
}

func (i *Instance) pluginLoaded(ctx context.Context, name string) (bool, error) {
	s := i.dialect.PluginStatus(name)
	var status string
	err := i.db.QueryRowContext(ctx, s.SQL, s.Args...).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, i.wrap("reading plugin status", err)
	}
	return status == "ACTIVE", nil
}

func (i *Instance) ensurePlugin(ctx context.Context, plugin [2]string) error {
	loaded, err := i.pluginLoaded(ctx, plugin[0])
	if err != nil || loaded {
		return err
	}
	return i.exec(ctx, "installing plugin "+plugin[0], i.dialect.InstallPlugin(plugin[0], plugin[1]))
}

// ResetBinaryLogs discards the binary logs and GTID history, to re-seed a
// member rebuilt from scratch:
//
//	MySQL 8.0: RESET MASTER;  MySQL 8.2+: RESET BINARY LOGS AND GTIDS;  MariaDB: RESET MASTER
func (i *Instance) ResetBinaryLogs(ctx context.Context) error {
	return i.exec(ctx, "resetting binary logs", i.dialect.ResetBinaryLogs())
}
