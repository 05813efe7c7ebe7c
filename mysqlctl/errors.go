package mysqlctl

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors callers branch on. Every error returned by this package
// that fits one of these wraps it, so errors.Is works; the message around it
// names the server and the operation.
var (
	// ErrUnreachable: the server did not answer (refused, reset, timed out).
	ErrUnreachable = errors.New("mysqlctl: server unreachable")
	// ErrDown: nothing listens at the address (connection refused, no socket
	// file), so no server process runs there and it can take no writes; a
	// connection that broke (reset, EOF) is ErrDown when a new connection
	// attempt is then refused. It always comes with ErrUnreachable. A
	// timeout is not ErrDown: a hung server may resume.
	ErrDown = errors.New("mysqlctl: server down")
	// ErrAccessDenied: the server rejected the credentials.
	ErrAccessDenied = errors.New("mysqlctl: access denied")
	// ErrPrivilege: logged in, but the user lacks a privilege the operation needs.
	ErrPrivilege = errors.New("mysqlctl: missing privilege")
	// ErrNotReplica: the server has no replication configured.
	ErrNotReplica = errors.New("mysqlctl: server is not a replica")
	// ErrTimeout: a wait (for a GTID set, for a fence to hold) ran out
	// before the condition held.
	ErrTimeout = errors.New("mysqlctl: timed out waiting")
	// ErrUnsupported: flavor or release this agent does not handle.
	ErrUnsupported = errors.New("mysqlctl: unsupported server")
	// ErrInvalidConfig: the connection settings themselves are wrong.
	ErrInvalidConfig = errors.New("mysqlctl: invalid configuration")
)

// MySQL/MariaDB server error numbers this package classifies.
const (
	erDBAccessDenied       = 1044
	erAccessDenied         = 1045
	erTableAccessDenied    = 1142
	erSpecificAccessDenied = 1227
	erProcAccessDenied     = 1370
	erAccessDeniedNoPass   = 1698
	erNoSuchThread         = 1094
)

// classify wraps err with the sentinel that describes it. It is the one place
// where driver, network and server errors are mapped. A cancelled context is
// returned unchanged: the caller stopped, nothing failed.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case erAccessDenied, erDBAccessDenied, erAccessDeniedNoPass:
			return fmt.Errorf("%w (check the user and its password file): %w", ErrAccessDenied, err)
		case erSpecificAccessDenied, erTableAccessDenied, erProcAccessDenied:
			return fmt.Errorf("%w (grant the agent user the privileges listed in the README): %w", ErrPrivilege, err)
		}
		return err
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: %w: %w", ErrUnreachable, ErrDown, err)
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &netErr) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// downProbeTimeout bounds the fresh connection attempt of classifyAt: a
// refusal comes at once, and anything slower is not proof of a dead server.
const downProbeTimeout = 500 * time.Millisecond

// classifyAt is classify for an error from the server at addr. A
// connection that broke in use (reset, EOF, invalid) does not say by itself
// whether a server still runs there: it may have been killed (an agent
// kills its hung mysqld), or a network hiccup cut the connection to a live
// one. One fresh connection attempt tells them apart: refused, or no socket
// file, is ErrDown, as for a dial. A timeout is never probed: a hung server
// may resume.
func classifyAt(addr string, err error) error {
	c := classify(err)
	if !brokenConn(err) || errors.Is(c, ErrDown) {
		return c
	}
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	// A dying server's listener resets the attempts queued on it as it
	// closes: ask again, and a moment later it refuses.
	for range 3 {
		conn, derr := net.DialTimeout(network, addr, downProbeTimeout)
		switch {
		case derr == nil:
			conn.Close()
			return c
		case errors.Is(derr, syscall.ECONNREFUSED) || errors.Is(derr, syscall.ENOENT):
			return fmt.Errorf("%w: %w (then a new connection was refused: %w): %w", ErrUnreachable, ErrDown, derr, err)
		case !errors.Is(derr, syscall.ECONNRESET):
			return c
		}
	}
	return c
}

// brokenConn reports whether err is a connection that broke while in use,
// rather than one that timed out.
func brokenConn(err error) bool {
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return false
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isNoSuchThread(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == erNoSuchThread
}
