package images

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTestFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Debian's layout, trimmed: the edits must make conf.d win and Debian's
// bind-address (127.0.0.1) go.
func TestEditMySQLConfig(t *testing.T) {
	root := t.TempDir()
	writeTestFiles(t, root, map[string]string{
		"etc/mysql/mariadb.cnf": "[client-server]\nsocket = /run/mysqld/mysqld.sock\n\n" +
			"!includedir /etc/mysql/conf.d/\n!includedir /etc/mysql/mariadb.conf.d/\n",
		"etc/mysql/mariadb.conf.d/50-server.cnf": "[mysqld]\nbind-address            = 127.0.0.1\n" +
			"#log_error = /var/log/mysql/error.log\nlog_bin = /var/log/mysql/mysql-bin.log\nexpire_logs_days        = 10\n",
		"etc/mysql/debian.cnf": "[client]\nuser     = root\n",
	})
	if err := editMySQLConfig(root); err != nil {
		t.Fatal(err)
	}
	main := readTestFile(t, filepath.Join(root, "etc/mysql/mariadb.cnf"))
	if i, j := strings.Index(main, "!includedir /etc/mysql/mariadb.conf.d/"), strings.Index(main, "!includedir /etc/mysql/conf.d/"); i < 0 || j < i ||
		strings.Count(main, "!includedir") != 2 {
		t.Errorf("mariadb.cnf:\n%s\nwant mariadb.conf.d, then conf.d, once each", main)
	}
	server := readTestFile(t, filepath.Join(root, "etc/mysql/mariadb.conf.d/50-server.cnf"))
	for _, want := range []string{"\n#bind-address", "\n#log_bin", "\n#log_error", "\nexpire_logs_days"} {
		if !strings.Contains(server, want) {
			t.Errorf("50-server.cnf has no %q:\n%s", want, server)
		}
	}
	if got := readTestFile(t, filepath.Join(root, "etc/mysql/debian.cnf")); !strings.Contains(got, "\n#user ") {
		t.Errorf("debian.cnf: user not commented out:\n%s", got)
	}

	// A layout that no longer matches is an error, not a silent no-op.
	other := t.TempDir()
	writeTestFiles(t, other, map[string]string{
		"etc/mysql/mariadb.cnf":                  "!includedir /etc/mysql/mariadb.conf.d/\n",
		"etc/mysql/mariadb.conf.d/50-server.cnf": "bind-address = 127.0.0.1\n",
	})
	if err := editMySQLConfig(other); err == nil {
		t.Error("no conf.d include: want an error")
	}
}

func TestSetAccountID(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	writeTestFiles(t, dir, map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/bash\nmysql:x:100:101:MySQL Server,,,:/nonexistent:/bin/false\n",
		"group":  "root:x:0:\nmysql:x:101:\nother:x:999:\n",
	})
	old, err := setAccountID(passwd, "mysql", 999)
	if err != nil || old != 100 {
		t.Fatalf("setAccountID = %d, %v; want 100", old, err)
	}
	if err := setPrimaryGroup(passwd, 101, 999); err != nil {
		t.Fatal(err)
	}
	if got := readTestFile(t, passwd); !strings.Contains(got, "\nmysql:x:999:999:MySQL Server,,,:/nonexistent:/bin/false\n") {
		t.Errorf("passwd:\n%s", got)
	}
	if _, err := setAccountID(filepath.Join(dir, "group"), "mysql", 999); err == nil || !strings.Contains(err.Error(), "other") {
		t.Errorf("gid 999 taken by other: got %v, want an error naming it", err)
	}
	if _, err := setAccountID(passwd, "nobody-here", 5); err == nil {
		t.Error("missing entry: want an error")
	}
}

func TestDpkgVersion(t *testing.T) {
	root := t.TempDir()
	writeTestFiles(t, root, map[string]string{"var/lib/dpkg/status": "Package: mariadb-server\nStatus: install ok installed\nVersion: 1:10.11.1\n\n" +
		"Package: mariadb-server-core\nStatus: install ok installed\nVersion: 1:10.11.18-0+deb12u1\n"})
	if v, err := dpkgVersion(root, "mariadb-server-core"); err != nil || v != "1:10.11.18-0+deb12u1" {
		t.Errorf("dpkgVersion = %q, %v", v, err)
	}
	if _, err := dpkgVersion(root, "galera-4"); err == nil {
		t.Error("not installed: want an error")
	}
}

// writeTree keeps hard links as links and numeric owners, and skips what
// it is told to.
func TestWriteTree(t *testing.T) {
	root := t.TempDir()
	writeTestFiles(t, root, map[string]string{"usr/bin/perl": "#!", "dev/null": "", "etc/x": "x"})
	if err := os.Link(filepath.Join(root, "usr/bin/perl"), filepath.Join(root, "usr/bin/perl5")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("x", filepath.Join(root, "etc/y")); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(t.TempDir(), "l.tar.gz")
	if err := writeLayerFile(layer, func(tw *tar.Writer) error {
		return writeTree(tw, root, func(rel string) bool { return strings.HasPrefix(rel, "dev/") })
	}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(layer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[hdr.Name] = hdr
	}
	if h := got["usr/bin/perl5"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/perl" {
		t.Errorf("usr/bin/perl5: %+v, want a hard link to usr/bin/perl", h)
	}
	if h := got["etc/y"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "x" {
		t.Errorf("etc/y: %+v, want a symlink to x", h)
	}
	if h := got["usr/bin/perl"]; h == nil || h.Uname != "" || h.Uid != os.Getuid() {
		t.Errorf("usr/bin/perl: %+v, want numeric owner %d only", h, os.Getuid())
	}
	if _, ok := got["dev/null"]; ok {
		t.Error("dev/null was not skipped")
	}
	if _, ok := got["dev/"]; !ok {
		t.Error("dev/ itself should stay (the runtime mounts on it)")
	}
}

func TestLookToolNamesTheFix(t *testing.T) {
	_, err := lookTool("no-such-tool-for-images")
	if !errors.Is(err, ErrMissingTool) || !strings.Contains(err.Error(), "no-such-tool-for-images") {
		t.Errorf("lookTool = %v, want ErrMissingTool naming the tool", err)
	}
	toolFixes["no-such-tool-for-images"] = "apt-get install it"
	defer delete(toolFixes, "no-such-tool-for-images")
	if _, err := lookTool("no-such-tool-for-images"); err == nil || !strings.Contains(err.Error(), "apt-get install it") {
		t.Errorf("lookTool = %v, want the fix in the message", err)
	}
}

func TestHashKeySeparatesParts(t *testing.T) {
	if hashKey([]byte("ab"), []byte("c")) == hashKey([]byte("a"), []byte("bc")) {
		t.Error(`("ab","c") and ("a","bc") hash the same`)
	}
}
