package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// requireBuild skips under -short and fails, naming the fix, without root
// or one of tools.
func requireBuild(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds container images (debootstrap, go build): skipped with -short")
	}
	if err := requireRoot("e2e/images tests"); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if _, err := lookTool(tool); err != nil {
			t.Fatal(err)
		}
	}
}

func testCache(t *testing.T) *Cache {
	t.Helper()
	c, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	c.Logf = t.Logf
	return c
}

// buildTwice builds an image, then again from the cache, logs both
// timings and the size, and checks that the second call returns the same
// (for the agent, TestAgentConcurrentCallers checks it: here the source
// may change in between).
func buildTwice(t *testing.T, what string, build func() (Image, error)) (Image, time.Duration) {
	t.Helper()
	start := time.Now()
	img, err := build()
	if err != nil {
		t.Fatalf("building the %s image: %v", what, err)
	}
	first := time.Since(start)
	start = time.Now()
	again, err := build()
	if err != nil {
		t.Fatalf("building the %s image again: %v", what, err)
	}
	warm := time.Since(start)
	if again != img {
		if what != "agent" {
			t.Fatalf("%s: second call returned %+v, first %+v: the cache key is not stable", what, again, img)
		}
		// Not a failure: the tree is edited while the tests run.
		t.Logf("agent: the source tree changed between the two builds (%s, then %s)", img.Ref, again.Ref)
		img = again
	}
	sizes, err := LayerSizes(img.Archive)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	fi, err := os.Stat(img.Archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s first call %.2fs, warm call %.2fs; layers %v bytes compressed = %.1f MiB; archive %.1f MiB",
		what, img.Ref, first.Seconds(), warm.Seconds(), sizes, float64(total)/(1<<20), float64(fi.Size())/(1<<20))
	return img, warm
}

// loadImage opens an archive and checks that its only tag is img.Ref.
func loadImage(t *testing.T, img Image) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(img.Archive) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{img.Ref}) {
		t.Fatalf("%s: manifest %+v, want one image tagged %s", img.Archive, m, img.Ref)
	}
	image, err := tarball.ImageFromPath(img.Archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("%s: platform %s/%s, want linux/<arch>: containerd would not match it", img.Ref, cf.OS, cf.Architecture)
	}
	return image, cf
}

// flatten reads the image's file system: the headers by path, and the
// content of the wanted files.
func flatten(t *testing.T, image v1.Image, want ...string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc := mutate.Extract(image)
	defer rc.Close()
	tr := tar.NewReader(rc)
	headers, bodies := map[string]*tar.Header{}, map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		headers[name] = hdr
		if slices.Contains(want, name) {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			bodies[name] = b
		}
	}
	return headers, bodies
}

// extract unpacks the image's file system into dir, owners and modes kept.
func extract(t *testing.T, image v1.Image, dir string) {
	t.Helper()
	tarPath, err := lookTool("tar")
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(image)
	defer rc.Close()
	cmd := exec.Command(tarPath, "-x", "--numeric-owner", "-p", "-C", dir)
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("extracting the image: %v\n%s", err, out)
	}
}

func TestAgentImage(t *testing.T) {
	requireBuild(t, "tar")
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := testCache(t)
	img, _ := buildTwice(t, "agent", func() (Image, error) { return c.Agent(ctx, repo) })
	if !strings.HasPrefix(img.Ref, AgentRepository+":") {
		t.Errorf("ref %s, want %s:<hash>", img.Ref, AgentRepository)
	}
	image, cf := loadImage(t, img)
	if want := []string{"/usr/local/bin/mysqlha-agent"}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, non-root)", cf.Config.User)
	}
	if !slices.ContainsFunc(cf.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		t.Errorf("env %q has no PATH", cf.Config.Env)
	}
	bins := []string{"usr/local/bin/mysqlha-agent", "usr/local/bin/agentctl", "usr/local/bin/mysqlha-copy"}
	headers, bodies := flatten(t, image, bins...)
	for _, bin := range bins {
		hdr := headers[bin]
		if hdr == nil || hdr.Typeflag != tar.TypeReg || hdr.Mode&0o755 != 0o755 {
			t.Fatalf("%s: header %+v, want an executable file", bin, hdr)
		}
		f, err := elf.NewFile(bytes.NewReader(bodies[bin]))
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked: the image has no libc", bin)
			}
		}
	}

	// The binary is the agent of this tree: it runs and prints its usage.
	dir := t.TempDir()
	extract(t, image, dir)
	out, err := exec.Command(filepath.Join(dir, "usr/local/bin/mysqlha-agent"), "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: mysqlha-agent") {
		t.Errorf("mysqlha-agent -h: %v\n%s", err, out)
	}
}

// A release build (make image) links the version in: the image's label,
// mysqlha-agent --version and agentctl version report it.
func TestReleaseAgentImageCarriesTheVersion(t *testing.T) {
	requireBuild(t, "tar")
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const version = "v0.0.0-releasetest"
	c := testCache(t)
	c.Version = version
	img, err := c.Agent(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	image, cf := loadImage(t, img)
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("label org.opencontainers.image.version %q, want %q", got, version)
	}
	dir := t.TempDir()
	extract(t, image, dir)
	bin := filepath.Join(dir, "usr/local/bin")
	if out, err := exec.Command(filepath.Join(bin, "mysqlha-agent"), "--version").CombinedOutput(); err != nil ||
		string(out) != "mysqlha-agent "+version+"\n" {
		t.Errorf("mysqlha-agent --version: %v %q", err, out)
	}
	out, _ := exec.Command(filepath.Join(bin, "agentctl"), "version", "--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:1",
		"--cluster=x", "--timeout=200ms").CombinedOutput()
	if !strings.Contains(string(out), version) {
		t.Errorf("agentctl version does not report %s:\n%s", version, out)
	}
}

// Two test packages build at the same time: both get the same complete
// archive, built once.
func TestAgentConcurrentCallers(t *testing.T) {
	requireBuild(t)
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	imgs, errs := make([]Image, 3), make([]error, 3)
	for i := range imgs {
		wg.Go(func() {
			c, err := DefaultCache()
			if err != nil {
				errs[i] = err
				return
			}
			imgs[i], errs[i] = c.Agent(ctx, repo)
		})
	}
	wg.Wait()
	for i := range imgs {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if imgs[i] != imgs[0] {
			t.Fatalf("caller %d got %+v, caller 0 %+v", i, imgs[i], imgs[0])
		}
	}
	loadImage(t, imgs[0])
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(imgs[0].Archive), "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestMariaDBImage(t *testing.T) {
	requireBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := testCache(t)
	img, warm := buildTwice(t, "mariadb", func() (Image, error) { return c.MariaDB(ctx) })
	if warm > time.Second {
		t.Errorf("a cached MariaDB image took %v, want well under a second", warm)
	}
	if !strings.HasPrefix(img.Ref, MariaDBRepository+":10.11-") {
		t.Errorf("ref %s, want %s:10.11-<hash>", img.Ref, MariaDBRepository)
	}
	image, cf := loadImage(t, img)
	if want := []string{"/usr/local/bin/docker-entrypoint.sh"}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want)
	}
	if want := []string{"mariadbd"}; !slices.Equal(cf.Config.Cmd, want) {
		t.Errorf("cmd %q, want %q", cf.Config.Cmd, want)
	}
	if cf.Config.User != "999:999" {
		t.Errorf("user %q, want 999:999 (mysql, as the official image)", cf.Config.User)
	}
	for _, prefix := range []string{"PATH=", "LANG=C.UTF-8", "MARIADB_VERSION=1:10.11."} {
		if !slices.ContainsFunc(cf.Config.Env, func(e string) bool { return strings.HasPrefix(e, prefix) }) {
			t.Errorf("env %q: no %s", cf.Config.Env, prefix)
		}
	}
	t.Logf("env %q", cf.Config.Env)

	headers, bodies := flatten(t, image, "etc/passwd", "etc/group", "etc/mysql/mariadb.cnf")
	for _, p := range []string{"usr/sbin/mariadbd", "usr/bin/mariadb", "usr/bin/mariadb-admin",
		"usr/bin/mariadb-install-db", "usr/bin/mariadb-tzinfo-to-sql", "usr/bin/my_print_defaults",
		"usr/bin/setpriv", "usr/local/bin/docker-entrypoint.sh", "usr/bin/mariadb-backup", "usr/bin/mbstream"} {
		if hdr := headers[p]; hdr == nil || hdr.Typeflag != tar.TypeReg || hdr.Mode&0o111 == 0 {
			t.Errorf("%s: header %+v, want an executable file", p, hdr)
		}
	}
	// The agent runs mariabackup (Debian's link to mariadb-backup) here.
	if hdr := headers["usr/bin/mariabackup"]; hdr == nil || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "mariadb-backup" {
		t.Errorf("usr/bin/mariabackup: header %+v, want a link to mariadb-backup", hdr)
	}
	for p, want := range map[string]int64{"run/mysqld": 0o777, "var/lib/mysql": 0o755, "docker-entrypoint-initdb.d": 0o755} {
		hdr := headers[p]
		if hdr == nil || hdr.Typeflag != tar.TypeDir || hdr.Mode&0o7777 != want {
			t.Errorf("%s: header %+v, want a folder with mode %o", p, hdr, want)
			continue
		}
		if p != "docker-entrypoint-initdb.d" && (hdr.Uid != MariaDBUID || hdr.Gid != MariaDBUID) {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, hdr.Uid, hdr.Gid, MariaDBUID, MariaDBUID)
		}
	}
	if !strings.Contains(string(bodies["etc/passwd"]), "\nmysql:x:999:999:") ||
		!strings.Contains(string(bodies["etc/group"]), "\nmysql:x:999:") {
		t.Errorf("mysql is not 999:999:\n%s\n%s", bodies["etc/passwd"], bodies["etc/group"])
	}
	cnf := string(bodies["etc/mysql/mariadb.cnf"])
	if i, j := strings.Index(cnf, "!includedir /etc/mysql/mariadb.conf.d/"), strings.Index(cnf, "!includedir /etc/mysql/conf.d/"); i < 0 || j < i {
		t.Errorf("mariadb.cnf must include conf.d after mariadb.conf.d:\n%s", cnf)
	}
	var trimmed []string
	for p := range headers {
		for _, dir := range []string{"usr/share/doc/", "usr/share/man/", "usr/share/locale/", "var/lib/apt/lists/", "var/cache/apt/", "var/lib/mysql/", "dev/"} {
			if strings.HasPrefix(p, dir) {
				trimmed = append(trimmed, p)
			}
		}
	}
	if len(trimmed) > 0 {
		t.Errorf("%d files that should have been removed, such as %q", len(trimmed), trimmed[:min(5, len(trimmed))])
	}
}
