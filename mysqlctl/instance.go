package mysqlctl

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Config says how to reach one server.
type Config struct {
	// Addr is host:port, or the absolute path of a Unix socket.
	Addr string
	User string
	// PasswordFile holds the password (a mounted Secret); a trailing newline
	// is ignored. Empty means no password.
	PasswordFile string
	// DialTimeout bounds connecting; ReadTimeout and WriteTimeout bound each
	// network read and write, so a hung server is noticed.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// ReplicationUsers are never killed by KillClients (besides User itself).
	ReplicationUsers []string
	// TLS, when set, is used for TCP connections (not for a socket); the
	// server name to verify is the host of Addr unless set.
	TLS *tls.Config
}

// Default timeouts: short enough that one observe pass fits comfortably in a
// loop_wait of 1 s on a healthy server.
const (
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Validate checks the settings without touching the network.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("address is empty; set host:port or a socket path"))
	}
	if c.User == "" {
		errs = append(errs, errors.New("user is empty"))
	}
	for name, d := range map[string]time.Duration{"dial": c.DialTimeout, "read": c.ReadTimeout, "write": c.WriteTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s timeout %s is negative", name, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

func readPassword(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: reading password file: %w", ErrInvalidConfig, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Instance is a connection pool to one server whose flavor is known.
type Instance struct {
	db      *sql.DB
	cfg     Config
	dialect Dialect
}

// Connect opens a pool, logs in and detects the flavor. It fails with
// ErrUnreachable, ErrAccessDenied, ErrUnsupported or ErrInvalidConfig.
func Connect(ctx context.Context, cfg Config) (*Instance, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	password, err := readPassword(cfg.PasswordFile)
	if err != nil {
		return nil, err
	}
	dc := mysql.NewConfig()
	dc.User, dc.Passwd = cfg.User, password
	dc.Net, dc.Addr = "tcp", cfg.Addr
	if strings.HasPrefix(cfg.Addr, "/") {
		dc.Net = "unix"
	}
	dc.Timeout, dc.ReadTimeout, dc.WriteTimeout = cfg.DialTimeout, cfg.ReadTimeout, cfg.WriteTimeout
	if cfg.TLS != nil && dc.Net == "tcp" {
		dc.TLS = cfg.TLS
	}
	// Client-side interpolation: one round trip per statement, and statements
	// that cannot be prepared (CHANGE MASTER, SET GLOBAL) still take arguments.
	dc.InterpolateParams = true
	connector, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(5 * time.Minute)

	inst := &Instance{db: db, cfg: cfg}
	var raw string
	if err := db.QueryRowContext(ctx, "SELECT @@version").Scan(&raw); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s as %s: %w", cfg.Addr, cfg.User, classifyAt(cfg.Addr, err))
	}
	info, err := ParseServerVersion(raw)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Addr, err)
	}
	inst.dialect = Dialect{Server: info}
	return inst, nil
}

// Close releases the pool.
func (i *Instance) Close() error { return i.db.Close() }

// Addr is the server's address as configured.
func (i *Instance) Addr() string { return i.cfg.Addr }

// Server is the detected flavor and release.
func (i *Instance) Server() ServerInfo { return i.dialect.Server }

// Dialect is the SQL generator for this server.
func (i *Instance) Dialect() Dialect { return i.dialect }

func (i *Instance) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s on %s: %w", op, i.cfg.Addr, classifyAt(i.cfg.Addr, err))
}

func (i *Instance) exec(ctx context.Context, op string, stmts ...Statement) error {
	for _, s := range stmts {
		if _, err := i.db.ExecContext(ctx, s.SQL, s.Args...); err != nil {
			return i.wrap(op, err)
		}
	}
	return nil
}
