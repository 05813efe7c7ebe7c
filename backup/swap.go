package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Names inside the data directory. The staging directory lives inside the
// data directory, not beside it, so that every step of the swap is a
// rename on one filesystem: in Kubernetes the data directory is a volume's
// mount point, and its parent is the container's own, ephemeral filesystem.
// MariaDB lists a directory there as a database named
// `#mysql50#.mysqlha-reinit-staging` while it exists; nothing reads it.
const (
	// MarkerFile exists from just before the target's mysqld is shut down
	// until the swap is done; a supervisor must not start mysqld while it
	// exists. It holds the swap's phase.
	MarkerFile = ".mysqlha-reinit"
	// ServerIDFile is the member's own server-id file, which survives.
	ServerIDFile = "mysqlha-server-id"
	// SavedPrefix starts the name of a file of transactions saved before an
	// automatic rebuild (package salvage): they exist nowhere else, so they
	// survive every swap, and a donor's are not copied.
	SavedPrefix  = "mysqlha-saved-"
	stagingDir   = ".mysqlha-reinit-staging"
	oldDir       = ".mysqlha-reinit-old"
	preparedFile = ".mysqlha-prepared"
)

// Phases of a swap, as recorded in the marker file.
const (
	phaseStaged   = "staged"    // nothing moved yet, or old entries moving out
	phaseMovedOut = "moved-out" // old entries all in oldDir; staging moving in
)

// Layout is the rebuild's files in one data directory.
type Layout struct{ Datadir string }

// Staging is where the backup is extracted and prepared.
func (l Layout) Staging() string { return filepath.Join(l.Datadir, stagingDir) }

// Marker is the marker file's path.
func (l Layout) Marker() string { return filepath.Join(l.Datadir, MarkerFile) }

// FreshStaging discards any staging left over (a half-written or
// unprepared backup is never trusted) and creates an empty one. It refuses
// while a swap is pending, since the staging is then the new data.
func (l Layout) FreshStaging() (string, error) {
	if l.SwapPending() {
		return "", fmt.Errorf("resetting staging in %s: a swap is pending; finish it first", l.Datadir)
	}
	if err := os.RemoveAll(l.Staging()); err != nil {
		return "", err
	}
	return l.Staging(), classify(os.Mkdir(l.Staging(), 0o750))
}

// DiscardStaging removes the staging directory unless a swap is pending.
func (l Layout) DiscardStaging() error {
	if l.SwapPending() {
		return nil
	}
	return os.RemoveAll(l.Staging())
}

// BeginSwap writes the marker, before the target's mysqld is shut down: from
// then on its supervisor waits, and Swap may run. The staging must be
// prepared.
func (l Layout) BeginSwap() error {
	if l.SwapPending() {
		return nil
	}
	if !Prepared(l.Staging()) {
		return fmt.Errorf("beginning swap in %s: the staged backup is not prepared", l.Datadir)
	}
	return classify(writeFileSync(l.Marker(), []byte(phaseStaged)))
}

// SwapPending reports whether the marker exists: mysqld must stay down.
func (l Layout) SwapPending() bool {
	_, err := os.Stat(l.Marker())
	return err == nil
}

// Op is one step of a swap.
type Op struct {
	// Kind is "rename", "remove", or "phase" (record Phase in the marker).
	Kind     string
	From, To string
	Phase    string
}

func (o Op) String() string {
	switch o.Kind {
	case "rename":
		return "rename " + o.From + " -> " + o.To
	case "remove":
		return "remove " + o.From
	}
	return "phase " + o.Phase
}

// PlanSwap is the rest of a swap given the marker's phase and the entries
// now in the data directory and in the staging directory (names only). It
// is pure, and a plan recomputed after any prefix of it ran is that plan's
// remainder: each phase only moves what is still at its source.
func PlanSwap(l Layout, phase string, dataEntries, stagingEntries []string) ([]Op, error) {
	data, staging, old := l.Datadir, l.Staging(), filepath.Join(l.Datadir, oldDir)
	fixed := map[string]bool{MarkerFile: true, ServerIDFile: true, stagingDir: true, oldDir: true}
	reserved := func(e string) bool { return fixed[e] || strings.HasPrefix(e, SavedPrefix) }
	var ops []Op
	switch phase {
	case phaseStaged:
		for _, e := range dataEntries {
			if !reserved(e) {
				ops = append(ops, Op{Kind: "rename", From: filepath.Join(data, e), To: filepath.Join(old, e)})
			}
		}
		ops = append(ops, Op{Kind: "phase", Phase: phaseMovedOut})
		fallthrough
	case phaseMovedOut:
		for _, e := range stagingEntries {
			if reserved(e) || e == preparedFile {
				// The donor's server-id file, saved transactions and the
				// staging's own bookkeeping do not belong to this member.
				continue
			}
			ops = append(ops, Op{Kind: "rename", From: filepath.Join(staging, e), To: filepath.Join(data, e)})
		}
		ops = append(ops,
			Op{Kind: "remove", From: staging},
			Op{Kind: "remove", From: old},
			Op{Kind: "remove", From: l.Marker()})
	default:
		return nil, fmt.Errorf("planning swap in %s: unknown phase %q in %s", data, phase, MarkerFile)
	}
	return ops, nil
}

// Swap replaces the data directory's contents with the prepared staging,
// keeping the server-id file; mysqld must be down. It resumes a swap a
// crash interrupted, and removes the marker last. Without a marker it does
// nothing.
func (l Layout) Swap() error {
	const op = "swapping in rebuilt data"
	b, err := os.ReadFile(l.Marker())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	phase := strings.TrimSpace(string(b))
	if err := os.MkdirAll(filepath.Join(l.Datadir, oldDir), 0o750); err != nil {
		return fmt.Errorf("%s: %w", op, classify(err))
	}
	dataEntries, err := names(l.Datadir)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	stagingEntries, err := names(l.Staging())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", op, err)
	}
	ops, err := PlanSwap(l, phase, dataEntries, stagingEntries)
	if err != nil {
		return err
	}
	for _, o := range ops {
		switch o.Kind {
		case "rename":
			err = os.Rename(o.From, o.To)
		case "remove":
			err = os.RemoveAll(o.From)
		case "phase":
			err = writeFileSync(l.Marker(), []byte(o.Phase))
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %w", op, o, classify(err))
		}
	}
	return nil
}

func names(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name()
	}
	return out, nil
}
