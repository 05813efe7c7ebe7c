// Package mysqlctl observes and controls one MySQL or MariaDB server over
// database/sql (github.com/go-sql-driver/mysql).
//
// It owns two things: reading a server's state into plain structs (Status,
// ReplicaStatus, Connections) and the actions the HA agent takes on it
// (fence, unfence, kill clients, stop/start/reset/repoint replication, wait
// for a GTID set, semi-sync on either side). Every action is idempotent, so
// the agent may repeat it after a crash at any point. Fence returns nil only
// once the server reads back as read-only, and to get there within the
// caller's deadline it kills the client sessions that hold it up.
//
// The SQL differs per flavor (MySQL 8.0.26+ and 8.4, MariaDB 10.6+). All of it
// is produced by the pure Dialect type, which is covered statement by
// statement in dialect_test.go; the MariaDB dialect is additionally verified
// against live servers in the integration tests. No MySQL (Oracle) server is
// available in this project's test environment, so the MySQL dialect is
// verified at the statement level only.
//
// mysqlctl makes no decisions: it never chooses a role, and it never reads or
// writes the DCS.
package mysqlctl
