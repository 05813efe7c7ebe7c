package dcs

import "errors"

// Sentinel errors. Backends wrap them (fmt.Errorf("...: %w", ErrX)) with the
// operation, the object and the native cause, so errors.Is works on both the
// sentinel and the cause. Each backend maps its native errors to these in one
// function.
//
// A context cancelled by the caller is returned as context.Canceled, never as
// ErrUnreachable: a clean stop is not a DCS failure. A context that hit its
// deadline while talking to the DCS is ErrUnreachable.
var (
	// ErrHeld: the leader lock is held by another member and has not expired.
	ErrHeld = errors.New("dcs: leader lock held by another member")
	// ErrNotLeader: the caller does not hold the leader lock (any more).
	ErrNotLeader = errors.New("dcs: not the leader lock holder")
	// ErrConflict: a concurrent writer changed the record first (lost
	// compare-and-set). Re-read and decide again.
	ErrConflict = errors.New("dcs: conflicting concurrent write")
	// ErrExists: a create-if-absent record (switchover request, initialized)
	// already exists.
	ErrExists = errors.New("dcs: record already exists")
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("dcs: record not found")
	// ErrUnreachable: the DCS did not answer in time (connection refused,
	// timeout, no quorum, context deadline while talking to it).
	ErrUnreachable = errors.New("dcs: store unreachable")
	// ErrForbidden: the DCS refused the credentials or the operation (RBAC
	// 403, etcd permission denied). The wrapping error names what was refused
	// and how to grant it.
	ErrForbidden = errors.New("dcs: forbidden")
	// ErrCorrupt: a stored record could not be decoded or is impossible. The
	// wrapping error names the object or key and what is wrong with it.
	ErrCorrupt = errors.New("dcs: corrupt record")
	// ErrInvalid: the caller passed an invalid argument (bad name, ttl,
	// config). Not retryable.
	ErrInvalid = errors.New("dcs: invalid argument")
	// ErrLive: DeleteMember refused because the member is live (it holds
	// the leader lock, or its record is live under the backend's rule); the
	// wrapping error says which.
	ErrLive = errors.New("dcs: member is live")
)

// LastOrSilence describes why a first read has not succeeded: its last
// error, or, when no attempt has ended yet, that the DCS has not answered
// (a dial or a request still hanging), never "<nil>".
func LastOrSilence(last error) string {
	if last == nil {
		return "no answer yet: no request has come back, failed or not; the DCS is down, hung or unreachable from here " +
			"(a refused connection is retried before it fails)"
	}
	return "last error: " + last.Error()
}
