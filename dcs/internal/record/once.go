package record

import (
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// The switchover request and the initialized record are written once: only
// while none is stored, else the write fails with dcs.ErrExists. The write
// itself is the backend's, because each makes "only while none is stored"
// atomic in its own way (etcd: a transaction on create revision 0;
// Kubernetes: an annotation added to the state Lease under its
// resourceVersion; memory: a nil check under the server's lock). What comes
// before and after it is shared here: preparing the record, and the
// refusal.

// PrepareSwitchover readies sw for its create-once write: RequestedAt
// defaults to now, the read-side fields are cleared, and the request must
// validate (errors wrap dcs.ErrInvalid). It returns the request and its
// encoding.
func PrepareSwitchover(sw dcs.Switchover, now time.Time) (dcs.Switchover, []byte, error) {
	if sw.RequestedAt.IsZero() {
		sw.RequestedAt = now
	}
	sw.Version, sw.Err = "", nil
	data, err := EncodeSwitchover(sw)
	if err != nil {
		return dcs.Switchover{}, nil, err
	}
	return sw, data, nil
}

// PrepareReinit readies r for its create-once write as PrepareSwitchover
// does for a switchover request.
func PrepareReinit(r dcs.Reinit, now time.Time) (dcs.Reinit, []byte, error) {
	if r.RequestedAt.IsZero() {
		r.RequestedAt = now
	}
	r.Version, r.Err = "", nil
	data, err := EncodeReinit(r)
	if err != nil {
		return dcs.Reinit{}, nil, err
	}
	return r, data, nil
}

// PrepareRestart readies r for its create-once write as PrepareSwitchover
// does for a switchover request.
func PrepareRestart(r dcs.Restart, now time.Time) (dcs.Restart, []byte, error) {
	if r.RequestedAt.IsZero() {
		r.RequestedAt = now
	}
	r.Version, r.Err = "", nil
	data, err := EncodeRestart(r)
	if err != nil {
		return dcs.Restart{}, nil, err
	}
	return r, data, nil
}

// PrepareInitialized readies in for its create-once write: At defaults to
// now, the read-side fields are cleared, and the record must validate
// (errors wrap dcs.ErrInvalid). It returns the record and its encoding.
func PrepareInitialized(in dcs.Initialized, now time.Time) (dcs.Initialized, []byte, error) {
	if in.At.IsZero() {
		in.At = now
	}
	in.Version, in.Err = "", nil
	data, err := EncodeInitialized(in)
	if err != nil {
		return dcs.Initialized{}, nil, err
	}
	return in, data, nil
}

// SwitchoverExists is the refusal of a switchover request while the one
// encoded as stored is pending.
func SwitchoverExists(stored []byte) error {
	return fmt.Errorf("%w: a switchover request is already pending: %s", dcs.ErrExists, stored)
}

// ReinitExists is the refusal of a reinit request while the one encoded as
// stored is pending.
func ReinitExists(stored []byte) error {
	return fmt.Errorf("%w: a reinit request is already pending (wait for it, or clear it with agentctl reinit MEMBER --cancel): %s", dcs.ErrExists, stored)
}

// RestartExists is the refusal of a restart request while the one encoded
// as stored is pending.
func RestartExists(stored []byte) error {
	return fmt.Errorf("%w: a restart request is already pending (wait for it, or clear it with agentctl restart MEMBER --cancel): %s", dcs.ErrExists, stored)
}

// InitializedExists is the refusal of an initialized record while the one
// encoded as stored is recorded.
func InitializedExists(stored []byte) error {
	return fmt.Errorf("%w: cluster already initialized: %s", dcs.ErrExists, stored)
}
