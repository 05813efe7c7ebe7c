package mysqlctl

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
)

// BinaryLogFiles lists the server's binary log files, oldest first, as
// paths in the directory of @@log_bin_basename (absolute as the server
// sees them; the agent must see the same path, as it does the data
// directory). Needs BINLOG MONITOR (REPLICATION CLIENT):
//
//	SELECT @@log_bin_basename
//	SHOW BINARY LOGS
func (i *Instance) BinaryLogFiles(ctx context.Context) ([]string, error) {
	const op = "listing binary logs"
	var base sql.NullString
	if err := i.db.QueryRowContext(ctx, "SELECT @@log_bin_basename").Scan(&base); err != nil {
		return nil, i.wrap(op, err)
	}
	if !base.Valid || base.String == "" {
		return nil, fmt.Errorf("%s on %s: %w: binary logging is off (log_bin)", op, i.cfg.Addr, ErrUnsupported)
	}
	rows, err := i.db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, i.wrap(op, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, i.wrap(op, err)
	}
	var files []string
	for rows.Next() {
		// Log_name first; File_size and, on MySQL, Encrypted follow.
		vals := make([]any, len(cols))
		var name string
		vals[0] = &name
		for k := 1; k < len(vals); k++ {
			vals[k] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, i.wrap(op, err)
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(base.String), name)
		}
		files = append(files, name)
	}
	if err := rows.Err(); err != nil {
		return nil, i.wrap(op, err)
	}
	return files, nil
}
