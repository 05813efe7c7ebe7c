package backup

import (
	"context"
	"io"
	"os"
)

// Local is one member's side of rebuilds, on the host (or pod) where its
// mysqld's data directory is mounted: as a donor it streams a backup, as a
// target it stages, swaps and reports the position to resume from.
type Local struct {
	Source Source
	// TmpDir holds mariabackup's temporary files while streaming; the
	// system's temporary directory when empty.
	TmpDir string
}

func (l Local) layout() Layout { return Layout{Datadir: l.Source.Datadir} }

// Stream writes a backup of the local mysqld to w (see Stream).
func (l Local) Stream(ctx context.Context, w io.Writer) error {
	tmp := l.TmpDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmp, "mysqlha-clone-")
	if err != nil {
		return classify(err)
	}
	defer os.RemoveAll(dir)
	return Stream(ctx, l.Source, dir, w)
}

// Stage extracts and prepares the backup read from r, returning the
// donor's GTID position at its consistent point.
func (l Local) Stage(ctx context.Context, r io.Reader) (string, error) {
	bi, err := Stage(ctx, l.layout(), r)
	return bi.GTID, err
}

// BeginSwap, Swap and SwapPending are Layout's, for the data directory.
func (l Local) BeginSwap() error  { return l.layout().BeginSwap() }
func (l Local) Swap() error       { return l.layout().Swap() }
func (l Local) SwapPending() bool { return l.layout().SwapPending() }

// Discard removes an unused staging directory.
func (l Local) Discard() error { return l.layout().DiscardStaging() }

// Position is the GTID position of the backup now in the data directory
// (its binlog record moved in with it), to resume replication from.
func (l Local) Position() (string, error) {
	bi, err := ReadBinlogInfo(l.Source.Datadir)
	return bi.GTID, err
}
