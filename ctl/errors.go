package ctl

import (
	"errors"
	"fmt"

	"github.com/mysqlha/mysqlha/dcs"
)

// Exit codes, one per failure a script may want to tell apart.
const (
	ExitOK             = 0
	ExitError          = 1
	ExitUsage          = 2
	ExitUnknownMember  = 3
	ExitUnhealthy      = 4
	ExitNoLeader       = 5
	ExitPending        = 6
	ExitTimeout        = 7
	ExitUnreachable    = 8
	ExitRejected       = 9
	ExitAborted        = 10
	ExitUnknownCluster = 11
)

// Error is a command failure with its exit code.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func fail(code int, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ExitCode maps any error to the process exit code.
func ExitCode(err error) int {
	var e *Error
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, dcs.ErrUnreachable), errors.Is(err, dcs.ErrForbidden):
		return ExitUnreachable
	case errors.Is(err, dcs.ErrExists):
		return ExitPending
	}
	return ExitError
}
