// Package backup copies a running MariaDB server's data to another member
// with mariabackup: the donor side streams a physical backup (xbstream) of
// its local mysqld, the target side extracts it into a staging directory,
// prepares it, and later swaps it into its data directory while its mysqld
// is down. It owns the mariabackup and mbstream processes and the on-disk
// layout of a rebuild; it does not talk to the DCS or decide when to
// rebuild (the agent does).
//
// Guarantees: a staging directory is used only after Prepare marked it
// complete, so a half-written or unprepared staging is discarded and the
// stream fetched again; Swap is idempotent and resumes where a crash left
// it, driven by the phase recorded in the reinit marker file. The member's
// own server-id file and the marker survive the swap.
//
// MySQL's equivalent is the CLONE plugin, driven by SQL (see mysqlctl's
// CloneStatements), which needs none of this.
package backup
