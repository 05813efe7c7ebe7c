package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Binaries, overridable for unusual installs.
var (
	MariabackupPath = "mariabackup"
	MbstreamPath    = "mbstream"
)

// ErrMissingTool means mariabackup or mbstream is not installed.
var ErrMissingTool = errors.New("backup: tool missing")

// ErrDiskFull means the staging or temporary directory ran out of space.
var ErrDiskFull = errors.New("backup: disk full")

// Source is how mariabackup reaches the local mysqld it backs up: it must
// run on the same host, since it reads the data files directly.
type Source struct {
	// Datadir is the server's @@datadir.
	Datadir string
	// Socket, or else Host and Port, reach the server.
	Socket string
	Host   string
	Port   int
	// User needs RELOAD, PROCESS, BINLOG MONITOR (MariaDB 10.5+).
	User, Password string
}

// Stream runs `mariabackup --backup --stream=xbstream` against src and
// copies the stream to w. tmpDir receives mariabackup's temporary files and
// the credentials file (mode 0600, so the password is not on a command
// line); it must exist.
func Stream(ctx context.Context, src Source, tmpDir string, w io.Writer) error {
	const op = "streaming backup"
	cnf, err := writeCredentials(tmpDir, src)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer os.Remove(cnf)
	args := []string{"--defaults-file=" + cnf, "--backup", "--stream=xbstream",
		"--datadir=" + src.Datadir, "--target-dir=" + tmpDir}
	if src.Socket != "" {
		args = append(args, "--socket="+src.Socket)
	} else {
		args = append(args, "--host="+src.Host, "--port="+strconv.Itoa(src.Port), "--protocol=tcp")
	}
	return run(ctx, op, MariabackupPath, args, nil, w)
}

// writeCredentials writes the connection user and password as an option
// file that only this process's user can read.
func writeCredentials(dir string, src Source) (string, error) {
	f, err := os.CreateTemp(dir, "mariabackup-*.cnf")
	if err != nil {
		return "", classify(err)
	}
	defer f.Close()
	// Quoted: a password may hold characters the option parser treats
	// specially (#, spaces).
	q := func(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
	body := fmt.Sprintf("[mariabackup]\nuser=%s\npassword=%s\n", q(src.User), q(src.Password))
	if _, err := f.WriteString(body); err != nil {
		os.Remove(f.Name())
		return "", classify(err)
	}
	return f.Name(), nil
}

// Extract unpacks an xbstream from r into dir with `mbstream -x`. dir must
// exist and be empty.
func Extract(ctx context.Context, r io.Reader, dir string) error {
	return run(ctx, "extracting backup", MbstreamPath, []string{"-x", "-C", dir}, r, nil)
}

// Prepare runs `mariabackup --prepare` on an extracted backup in dir, making
// its data files consistent (crash recovery of the copied redo log), then
// records that dir is complete (see Prepared).
func Prepare(ctx context.Context, dir string) error {
	const op = "preparing backup"
	if err := run(ctx, op, MariabackupPath, []string{"--no-defaults", "--prepare", "--target-dir=" + dir}, nil, nil); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, preparedFile), []byte("ok\n")); err != nil {
		return fmt.Errorf("%s: %w", op, classify(err))
	}
	return nil
}

// Prepared reports whether dir holds a backup that Prepare completed.
func Prepared(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, preparedFile))
	return err == nil
}

// run runs one tool, with stdin and stdout as given; its stderr's tail goes
// into the error, which names the fix where one is known.
func run(ctx context.Context, op, name string, args []string, stdin io.Reader, stdout io.Writer) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s: %w: %s not found (install the mariadb-backup package, e.g. apt-get install mariadb-backup)", op, ErrMissingTool, name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr tailBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if isDiskFull(msg) {
			return fmt.Errorf("%s: %w (free space on the target's data volume: a rebuild needs room for a second copy of the data): %s", op, ErrDiskFull, msg)
		}
		return fmt.Errorf("%s: %s: %w: %s", op, name, err, msg)
	}
	return nil
}

func isDiskFull(msg string) bool {
	return strings.Contains(msg, "No space left on device") || strings.Contains(msg, "errno 28") || strings.Contains(msg, "Errcode: 28")
}

func classify(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// tailBuffer keeps the last 4 KiB written: mariabackup logs every file it
// copies, and only the end says why it failed.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	const max = 4096
	t.b = append(t.b, p...)
	if len(t.b) > max {
		t.b = append(t.b[:0], t.b[len(t.b)-max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.ToValidUTF8(t.b, nil)) }

func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Stage extracts the backup read from r into a fresh staging directory of
// l and prepares it, returning the donor's binlog position at the backup's
// consistent point. On failure the staging is discarded.
func Stage(ctx context.Context, l Layout, r io.Reader) (BinlogInfo, error) {
	dir, err := l.FreshStaging()
	if err != nil {
		return BinlogInfo{}, fmt.Errorf("staging backup: %w", err)
	}
	bi, err := stage(ctx, dir, r)
	if err != nil {
		l.DiscardStaging()
		return BinlogInfo{}, err
	}
	return bi, nil
}

func stage(ctx context.Context, dir string, r io.Reader) (BinlogInfo, error) {
	if err := Extract(ctx, r, dir); err != nil {
		return BinlogInfo{}, err
	}
	bi, err := ReadBinlogInfo(dir)
	if err != nil {
		return BinlogInfo{}, err
	}
	if err := Prepare(ctx, dir); err != nil {
		return BinlogInfo{}, err
	}
	return bi, nil
}
