package salvage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FilePrefix starts the name of every saved file. It equals
// backup.SavedPrefix: a rebuild keeps the files so named in the data
// directory, so the data directory may serve as Dir.
const FilePrefix = "mysqlha-saved-"

// tempPrefix starts Save's working files. Not FilePrefix: one left behind by
// a crash is no saved file, and a rebuild should sweep it away.
const tempPrefix = "." + FilePrefix

// ErrNoTool: the mariadb-binlog command could not be found.
var ErrNoTool = errors.New("salvage: mariadb-binlog not found")

// SaveOptions say what Save saves and where.
type SaveOptions struct {
	// Dir receives the file, and is created (0750) if missing. It must
	// survive the rebuild: the data directory does, for files named
	// FilePrefix*.
	Dir string
	// Cluster, Member and Leader are named in the file's header: the cluster,
	// the diverged member whose binary logs are read, and the leader it
	// diverged from. Member is also part of the file's name.
	Cluster, Member, Leader string
	// Files are the member's binary logs, oldest first (mysqlctl.Instance.BinaryLogFiles).
	Files []string
	// Want selects the transactions to save (see NotIn).
	Want Want
	// Now stamps the file's name and header; zero means the current time.
	Now time.Time
	// Binlog is the mariadb-binlog command; "" means mariadb-binlog, else
	// mysqlbinlog, found on PATH.
	Binlog string
}

func (o SaveOptions) validate() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"Dir", o.Dir}, {"Cluster", o.Cluster}, {"Member", o.Member}, {"Leader", o.Leader},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(o.Files) == 0 {
		missing = append(missing, "Files")
	}
	if o.Want == nil {
		missing = append(missing, "Want")
	}
	if len(missing) > 0 {
		return fmt.Errorf("salvage: SaveOptions lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// Saved describes a saved file.
type Saved struct {
	// Path is the file; "" when nothing was selected and no file written.
	Path string
	// Count is how many transactions it holds.
	Count int
	// GTIDs summarises their original GTIDs: per domain and server_id the
	// first, the last and how many, e.g. "0-1-6..0-1-9 (4)".
	GTIDs string
}

// Save copies the transactions o.Want selects out of o.Files ([Extract]),
// renders them with mariadb-binlog --verbose (row events as replayable
// BINLOG statements with the rows spelled out in comments) and writes them
// to a new file in o.Dir named FilePrefix + "<UTC time>-<member>.sql", e.g.
// mysqlha-saved-20261206T051500Z-db1.sql.
//
// The file starts with SQL comments naming the cluster, member and leader,
// the saved GTIDs and how to replay them. The lines of mariadb-binlog's
// output that set @@session.gtid_domain_id, server_id and gtid_seq_no are
// removed, so the transactions replay as new ones under the primary's own
// GTIDs: under the old server_id the rebuilt member, which keeps its
// server_id, would skip them when they replicate back to it, and the old
// seq_no would be refused under gtid_strict_mode.
//
// The file is written completely (temporary file, fsync, link, fsync of
// the directory) or not at all. When nothing is selected Save writes no
// file and returns a zero Saved. It fails, writing nothing, when a log is
// corrupt, truncated or encrypted (a [*LogError]), when mariadb-binlog
// cannot be found ([ErrNoTool]) or fails, or when its output is not what
// this package knows how to edit.
func Save(ctx context.Context, o SaveOptions) (Saved, error) {
	if err := o.validate(); err != nil {
		return Saved{}, err
	}
	if err := ctx.Err(); err != nil {
		return Saved{}, fmt.Errorf("salvage: %w", err)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return Saved{}, fmt.Errorf("salvage: creating the directory for saved transactions: %w", err)
	}
	extracted, err := os.CreateTemp(o.Dir, tempPrefix+"*.binlog")
	if err != nil {
		return Saved{}, fmt.Errorf("salvage: creating a temporary file: %w", err)
	}
	defer os.Remove(extracted.Name())
	gtids, err := Extract(o.Files, o.Want, extracted)
	if cerr := extracted.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing the extracted binary log: %w", cerr)
	}
	if err != nil {
		return Saved{}, fmt.Errorf("salvage: extracting %s's transactions: %w", o.Member, err)
	}
	if len(gtids) == 0 {
		return Saved{}, nil
	}
	tool, err := findTool(o.Binlog)
	if err != nil {
		return Saved{}, err
	}
	saved := Saved{Count: len(gtids), GTIDs: summarize(gtids)}
	name := fileName(o.Member, o.Now)

	tmp, err := os.CreateTemp(o.Dir, tempPrefix+"*.sql")
	if err != nil {
		return Saved{}, fmt.Errorf("salvage: creating a temporary file: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = writeSaved(ctx, tmp, o, name, saved, tool, extracted.Name())
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("salvage: writing %s: %w", tmp.Name(), cerr)
	}
	if err != nil {
		return Saved{}, err
	}
	if saved.Path, err = publish(tmp.Name(), o.Dir, name); err != nil {
		return Saved{}, err
	}
	return saved, nil
}

// writeSaved writes the header and the rendered transactions to f and
// flushes them to disk.
func writeSaved(ctx context.Context, f *os.File, o SaveOptions, name string, s Saved, tool, extracted string) error {
	if err := f.Chmod(0o640); err != nil {
		return fmt.Errorf("salvage: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	writeHeader(w, o, name, s)
	if err := render(ctx, tool, extracted, w, s.Count); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("salvage: writing %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("salvage: syncing %s: %w", f.Name(), err)
	}
	return nil
}

// fileName is FilePrefix + "<UTC time>-<member>.sql", with any character
// of member that does not belong in a file name replaced by '_'.
func fileName(member string, now time.Time) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '_'
	}, member)
	return FilePrefix + now.UTC().Format("20060102T150405Z") + "-" + safe + ".sql"
}

func writeHeader(w io.Writer, o SaveOptions, name string, s Saved) {
	member, leader := commentSafe(o.Member), commentSafe(o.Leader)
	lines := []string{
		"mysqlha: transactions saved before rebuilding a diverged member",
		"",
		"cluster:      " + commentSafe(o.Cluster),
		"member:       " + member,
		"leader:       " + leader + " (" + member + " diverged from it)",
		"saved at:     " + o.Now.UTC().Format(time.RFC3339),
		"transactions: " + strconv.Itoa(s.Count),
		"GTIDs:        " + s.GTIDs,
		"",
		member + " committed these transactions, but " + leader + " never received them before",
		"it became the leader. The agent rebuilds " + member + " from the cluster, which",
		"discards them there; this file is the only copy left. Review them, then,",
		"to apply them again, run this file on the current primary as a user with",
		"the BINLOG REPLAY privilege:",
		"",
		"    mariadb < " + name,
		"",
		"They replay as new transactions under the primary's own GTIDs: the lines",
		"that set gtid_domain_id, server_id and gtid_seq_no were removed. Rows",
		"changed on the primary since may conflict, and replaying twice applies",
		"them twice. The \"# at N\" positions below are offsets in the extracted",
		"log, not in " + member + "'s binary logs.",
	}
	for _, l := range lines {
		fmt.Fprintln(w, strings.TrimRight("-- "+l, " "))
	}
	fmt.Fprintln(w)
}

// commentSafe keeps s on one comment line: a control character in a name
// must not end the comment and leave the rest to be executed.
func commentSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// findTool resolves the mariadb-binlog command.
func findTool(name string) (string, error) {
	candidates := []string{"mariadb-binlog", "mysqlbinlog"}
	if name != "" {
		candidates = []string{name}
	}
	for _, c := range candidates {
		if path, err := exec.LookPath(c); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: no %s on PATH (%s); install the MariaDB client programs (package mariadb-client) where the agent runs",
		ErrNoTool, strings.Join(candidates, " or "), os.Getenv("PATH"))
}

// render runs mariadb-binlog on the extracted log and copies its output to
// w without the lines that would replay the transactions under their old
// GTIDs. mariadb-binlog prints one gtid_seq_no line per transaction; any
// other count means its output changed in a way this package does not know.
func render(ctx context.Context, tool, log string, w io.Writer, count int) error {
	// --no-defaults: options in a my.cnf [client] group must not change the
	// output (or make it read from a server).
	cmd := exec.CommandContext(ctx, tool, "--no-defaults", "--verbose", log)
	// Once the command is killed, stop waiting for its output even if a
	// child it started still holds the pipe.
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("salvage: running %s: %w", tool, err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	seqLines, filterErr := dropGTIDLines(pr, w)
	if filterErr != nil {
		// Unblocks the command's writes; it fails and exits.
		pr.CloseWithError(filterErr)
	}
	waitErr := <-waited
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("salvage: rendering the transactions: %w", ctx.Err())
	case filterErr != nil:
		return fmt.Errorf("salvage: copying %s's output: %w", tool, filterErr)
	case waitErr != nil:
		return fmt.Errorf("salvage: %s --verbose %s: %w: %s", tool, log, waitErr, tail(stderr.String(), 2000))
	case seqLines != count:
		return fmt.Errorf("salvage: %s printed %d gtid_seq_no lines for %d transactions; "+
			"its output is not in the form this package edits (is it MariaDB's?), so nothing was saved; set Binlog to MariaDB's mariadb-binlog",
			tool, seqLines, count)
	}
	return nil
}

// mariadb-binlog prints each GTID event as a comment line, e.g.
// "#261206  3:32:15 server id 2  end_log_pos 370 CRC32 0xb01e490a \tGTID 0-2-1 ddl",
// then lines that replay the transaction under that GTID, e.g.
// "/*M!100001 SET @@session.gtid_seq_no=1*//*!*/;".
var (
	gtidComment = regexp.MustCompile(`^#\d{6} .*\tGTID \d+-\d+-\d+( |\r?\n?$)`)
	gtidLine    = regexp.MustCompile(`^/\*M?!\d+ SET @@session\.(gtid_domain_id|server_id|gtid_seq_no)=\d+\*/(/\*!\*/;)?\r?\n?$`)
)

// dropGTIDLines copies r to w without the gtidLine lines that follow a
// GTID event's comment (elsewhere such a line is data, e.g. inside a
// multi-line statement) and returns how many of them set gtid_seq_no.
func dropGTIDLines(r io.Reader, w io.Writer) (seqLines int, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	afterGTID := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case gtidComment.Match(line):
				afterGTID = true
			case afterGTID && bytes.HasPrefix(line, []byte("/*")):
				if m := gtidLine.FindSubmatch(line); m != nil {
					if string(m[1]) == "gtid_seq_no" {
						seqLines++
					}
					continue
				}
			default:
				afterGTID = false
			}
			if _, werr := w.Write(line); werr != nil {
				return seqLines, werr
			}
		}
		if err == io.EOF {
			return seqLines, nil
		}
		if err != nil {
			return seqLines, err
		}
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// publish gives the finished temporary file tmp its name in dir without
// replacing an existing file (a link fails where a rename would overwrite),
// adding "-2", "-3", ... before ".sql" if needed, and syncs dir so the name
// survives a crash.
func publish(tmp, dir, name string) (string, error) {
	base := strings.TrimSuffix(name, ".sql")
	for n := 1; n <= 100; n++ {
		path := filepath.Join(dir, name)
		if n > 1 {
			path = filepath.Join(dir, base+"-"+strconv.Itoa(n)+".sql")
		}
		err := os.Link(tmp, path)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("salvage: naming the saved file %s: %w", path, err)
		}
		if err := syncDir(dir); err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("salvage: %s and 99 numbered variants already exist in %s; move old saved files away", name, dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("salvage: syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("salvage: syncing %s: %w", dir, err)
	}
	return nil
}
