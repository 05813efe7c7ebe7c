package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// ErrMissingTool is wrapped by the errors about a tool or privilege the
// MariaDB build or its test needs.
var ErrMissingTool = errors.New("images: missing tool")

// toolFixes says how to get each tool on Debian.
var toolFixes = map[string]string{
	"debootstrap": "apt-get install debootstrap",
	"unshare":     "apt-get install util-linux",
	"chroot":      "apt-get install coreutils",
	"tar":         "apt-get install tar",
}

// lookTool finds a system tool in PATH or in the sbin folders, which a
// non-login root shell's PATH may lack.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s not found in PATH nor /usr/sbin; install it: %s", ErrMissingTool, name, toolFixes[name])
}

// requireRoot fails unless the process is root: debootstrap installs
// packages and the build sets file owners.
func requireRoot(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: %s needs root (euid %d); run the tests as root", ErrMissingTool, what, os.Geteuid())
	}
	return nil
}

// buildRootfs runs debootstrap into root, in a private mount namespace:
// the /proc and /sys it mounts in the target vanish with the namespace even
// when it is killed, so the folder can always be deleted safely.
func (c *Cache) buildRootfs(ctx context.Context, root string) error {
	if err := requireRoot("building the MariaDB image (debootstrap)"); err != nil {
		return err
	}
	debootstrap, err := lookTool("debootstrap")
	if err != nil {
		return err
	}
	unshare, err := lookTool("unshare")
	if err != nil {
		return err
	}
	debs := filepath.Join(c.Dir, "debs") // debootstrap's own package cache
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(filepath.Dir(root), "debootstrap.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"--mount", "--propagation", "private", "--", debootstrap,
		"--variant=minbase", "--include=" + strings.Join(mariadbPackages, ","), "--cache-dir=" + debs,
		debianSuite, root, debianMirror}
	c.logf("running %s %s", unshare, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, unshare, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(),
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	// debootstrap runs dpkg, wget and maintainer scripts: stop them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("debootstrap %s from %s: %w\n%s", debianSuite, debianMirror, err, lastLines(log, 40))
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// trimGlobs are removed from the rootfs: package indexes and caches, docs,
// translations, logs, the datadir Debian's postinst initialised, device
// nodes, and the backups of the account files (they hold the old mysql ids).
var trimGlobs = []string{
	"var/lib/apt/lists/*", "var/cache/apt/*", "var/cache/debconf/*-old", "var/lib/dpkg/*-old",
	"var/cache/ldconfig/aux-cache",
	"usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/lintian", "usr/share/locale/*",
	"var/lib/mysql/*", "dev/*",
	"etc/passwd-", "etc/group-", "etc/shadow-", "etc/gshadow-",
}

// prepareRootfs turns debootstrap's output into the image's file system and
// returns the installed MariaDB version.
func prepareRootfs(root string) (baseMeta, error) {
	var meta baseMeta
	for _, g := range trimGlobs {
		paths, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return meta, err
		}
		for _, p := range paths {
			if err := os.RemoveAll(p); err != nil {
				return meta, err
			}
		}
	}
	// Locales: only C.utf8 (LANG=C.UTF-8) stays.
	locales, _ := filepath.Glob(filepath.Join(root, "usr/lib/locale/*"))
	for _, p := range locales {
		if filepath.Base(p) != "C.utf8" {
			if err := os.RemoveAll(p); err != nil {
				return meta, err
			}
		}
	}
	// Logs: files go, folders (such as /var/log/mysql) stay.
	if err := filepath.WalkDir(filepath.Join(root, "var/log"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Remove(p)
	}); err != nil {
		return meta, err
	}
	// The host's resolver and name leak in; the runtime mounts its own.
	if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644); err != nil {
		return meta, err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("localhost\n"), 0o644); err != nil {
		return meta, err
	}
	if err := remapAccount(root, "mysql", MariaDBUID); err != nil {
		return meta, err
	}
	if err := editMySQLConfig(root); err != nil {
		return meta, err
	}
	v, err := dpkgVersion(root, "mariadb-server-core")
	if err != nil {
		return meta, err
	}
	if !strings.HasPrefix(v, "1:10.11.") {
		return meta, fmt.Errorf("%s has mariadb-server-core %s, want 10.11", debianSuite, v)
	}
	meta.Version = v
	return meta, nil
}

// remapAccount gives the user and group name the id id (the package's
// adduser picked the next free system id) and moves the owners of their
// files along.
func remapAccount(root, name string, id int) error {
	oldUID, err := setAccountID(filepath.Join(root, "etc/passwd"), name, id)
	if err != nil {
		return err
	}
	oldGID, err := setAccountID(filepath.Join(root, "etc/group"), name, id)
	if err != nil {
		return err
	}
	if err := setPrimaryGroup(filepath.Join(root, "etc/passwd"), oldGID, id); err != nil {
		return err
	}
	if oldUID == id && oldGID == id {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid := -1, -1
		if int(st.Uid) == oldUID {
			uid = id
		}
		if int(st.Gid) == oldGID {
			gid = id
		}
		if uid == -1 && gid == -1 {
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		// chown clears setuid/setgid: put them back.
		if fi.Mode()&fs.ModeSymlink == 0 && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			return syscall.Chmod(p, st.Mode&0o7777)
		}
		return nil
	})
}

// setAccountID sets the id (third field) of name in a passwd or group file
// and returns the old one; it fails when another entry already has id.
func setAccountID(file, name string, id int) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	old := -1
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return 0, fmt.Errorf("%s: bad id in %q", file, line)
		}
		if f[0] == name {
			old = n
			f[2] = strconv.Itoa(id)
			lines[i] = strings.Join(f, ":")
		} else if n == id {
			return 0, fmt.Errorf("%s: %s already has id %d, wanted for %s", file, f[0], id, name)
		}
	}
	if old < 0 {
		return 0, fmt.Errorf("%s: no entry %s", file, name)
	}
	return old, os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644)
}

// setPrimaryGroup moves the users of primary group oldGID to gid.
func setPrimaryGroup(file string, oldGID, gid int) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		if f := strings.Split(line, ":"); len(f) > 3 && f[3] == strconv.Itoa(oldGID) {
			f[3] = strconv.Itoa(gid)
			lines[i] = strings.Join(f, ":")
		}
	}
	return os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644)
}

var problematicOption = regexp.MustCompile(`^(bind-address|log|user\s)`)

// editMySQLConfig does what the official image does to Debian's files:
// comments out bind-address (Debian listens on 127.0.0.1 only), log* (log to
// stderr) and user, and reads /etc/mysql/conf.d after mariadb.conf.d so that
// the documented mount point wins.
func editMySQLConfig(root string) error {
	commented := 0
	err := filepath.WalkDir(filepath.Join(root, "etc/mysql"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".cnf") || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		changed := false
		for i, l := range lines {
			if problematicOption.MatchString(l) {
				lines[i], changed = "#"+l, true
				if strings.HasPrefix(l, "bind-address") {
					commented++
				}
			}
		}
		if !changed {
			return nil
		}
		return os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	})
	if err != nil {
		return err
	}
	if commented == 0 {
		return errors.New("no bind-address found in /etc/mysql: Debian's layout changed, check 50-server.cnf")
	}

	main := filepath.Join(root, "etc/mysql/mariadb.cnf")
	b, err := os.ReadFile(main)
	if err != nil {
		return err
	}
	const confD, mariadbConfD = "!includedir /etc/mysql/conf.d/", "!includedir /etc/mysql/mariadb.conf.d/"
	var out []string
	found := 0
	for _, l := range strings.Split(string(b), "\n") {
		switch strings.TrimSpace(l) {
		case confD:
			found++
			continue // re-added after mariadb.conf.d
		case mariadbConfD:
			found++
			out = append(out, l, confD)
			continue
		}
		out = append(out, l)
	}
	if found != 2 {
		return fmt.Errorf("%s: expected one %q and one %q line", main, confD, mariadbConfD)
	}
	return os.WriteFile(main, []byte(strings.Join(out, "\n")), 0o644)
}

// dpkgVersion reads the installed version of pkg from dpkg's status file.
func dpkgVersion(root, pkg string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return "", err
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			in = false
		case strings.HasPrefix(l, "Package: "):
			in = strings.TrimPrefix(l, "Package: ") == pkg
		case in && strings.HasPrefix(l, "Version: "):
			return strings.TrimPrefix(l, "Version: "), nil
		}
	}
	return "", fmt.Errorf("%s is not installed in the rootfs", pkg)
}
