package mysqlctl

import (
	"context"
	"database/sql"
	"fmt"
)

// Status reads the server's own state in two round trips:
//
//	SHOW GLOBAL VARIABLES WHERE Variable_name IN (read_only, server_id, gtid_executed | gtid_binlog_pos, ...)
//	SHOW GLOBAL STATUS WHERE Variable_name IN (Rpl_semi_sync_*_status, ...)
func (i *Instance) Status(ctx context.Context) (Status, error) {
	vars, err := i.keyValues(ctx, i.dialect.ShowVariables())
	if err != nil {
		return Status{}, i.wrap("reading variables", err)
	}
	stat, err := i.keyValues(ctx, i.dialect.ShowStatus())
	if err != nil {
		return Status{}, i.wrap("reading status", err)
	}
	st, err := i.dialect.parseStatus(vars, stat)
	if err != nil {
		return Status{}, i.wrap("parsing status", err)
	}
	return st, nil
}

// ReplicaStatus runs SHOW REPLICA STATUS (and, on MariaDB, SELECT
// @@gtid_slave_pos for the executed position). It fails with ErrNotReplica on
// a server with no replication configured.
func (i *Instance) ReplicaStatus(ctx context.Context) (ReplicaStatus, error) {
	r, err := i.replicaStatus(ctx)
	if err != nil {
		return ReplicaStatus{}, err
	}
	if r == nil {
		return ReplicaStatus{}, fmt.Errorf("reading replica status on %s: %w", i.cfg.Addr, ErrNotReplica)
	}
	if i.dialect.mariaDB() {
		if err := i.db.QueryRowContext(ctx, "SELECT @@gtid_slave_pos").Scan(&r.ExecutedGTID); err != nil {
			return ReplicaStatus{}, i.wrap("reading gtid_slave_pos", err)
		}
	}
	return *r, nil
}

// Observe is one full observe pass: Status plus SHOW REPLICA STATUS, three
// round trips. Replica is nil on a server with no replication configured.
func (i *Instance) Observe(ctx context.Context) (Observation, error) {
	st, err := i.Status(ctx)
	if err != nil {
		return Observation{}, err
	}
	r, err := i.replicaStatus(ctx)
	if err != nil {
		return Observation{}, err
	}
	if r != nil && i.dialect.mariaDB() {
		r.ExecutedGTID = st.GTIDSlavePos
	}
	return Observation{Status: st, Replica: r}, nil
}

func (i *Instance) replicaStatus(ctx context.Context) (*ReplicaStatus, error) {
	rows, err := i.db.QueryContext(ctx, i.dialect.ShowReplicaStatus().SQL)
	if err != nil {
		return nil, i.wrap("reading replica status", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, i.wrap("reading replica status", err)
	}
	if !rows.Next() {
		return nil, i.wrap("reading replica status", rows.Err())
	}
	values := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for k := range values {
		ptrs[k] = &values[k]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, i.wrap("reading replica status", err)
	}
	row := make(map[string]*string, len(cols))
	for k, c := range cols {
		if values[k].Valid {
			row[c] = &values[k].String
		} else {
			row[c] = nil
		}
	}
	r := parseReplicaStatus(row)
	return &r, nil
}

// Connections lists every session except the caller's own:
//
//	SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()
func (i *Instance) Connections(ctx context.Context) ([]Connection, error) {
	s := i.dialect.ListConnections()
	rows, err := i.db.QueryContext(ctx, s.SQL, s.Args...)
	if err != nil {
		return nil, i.wrap("listing connections", err)
	}
	defer rows.Close()
	var out []Connection
	for rows.Next() {
		var c Connection
		var host, command sql.NullString
		if err := rows.Scan(&c.ID, &c.User, &host, &command, &c.Time); err != nil {
			return nil, i.wrap("listing connections", err)
		}
		c.Host, c.Command = host.String, command.String
		out = append(out, c)
	}
	return out, i.wrap("listing connections", rows.Err())
}

// keyValues runs a two-column SHOW statement into a map.
func (i *Instance) keyValues(ctx context.Context, s Statement) (map[string]string, error) {
	rows, err := i.db.QueryContext(ctx, s.SQL, s.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]string, 16)
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v.String
	}
	return out, rows.Err()
}
