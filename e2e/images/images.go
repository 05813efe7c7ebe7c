// Package images builds the container images of the real-node e2e tests on
// this machine, without Docker and without a registry: the agent from the
// current source tree, and MariaDB 10.11 from Debian bookworm packages
// (debootstrap). Each image is written as a docker-archive tarball
// (go-containerregistry's tarball.Write) that `ctr -n k8s.io images import`
// loads into containerd; Image.Ref is the name it gets there.
//
// Images are cached in a git-ignored folder (<repo>/.cache/images), keyed by
// their inputs: the agent by the content of its binaries, MariaDB by the
// package list, the files this package adds and a recipe version. A cached
// archive is complete: it is written to a temporary name and renamed, under
// a file lock, so concurrent callers (two test binaries) never see a partial
// one and build it once.
//
// What it does not do: it pulls nothing from a registry, so the images only
// stand in for the real ones (mariadb:10.11, the agent's Dockerfile) where
// the contract documented on MariaDB holds; and building MariaDB needs root,
// debootstrap and the Debian archive (http://deb.debian.org/debian).
package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a built image: Archive is a docker-archive tarball whose only tag
// is Ref; importing it into containerd creates the image Ref.
type Image struct {
	Ref     string
	Archive string
}

// Cache is the folder images are built into and reused from.
type Cache struct {
	// Dir holds the archives, the debootstrap package cache and lock files.
	Dir string
	// Logf, when set, receives progress lines (a cold MariaDB build takes
	// about a minute); testing.T.Logf fits.
	Logf func(format string, args ...any)
	// Version, when set, is linked into the agent's binaries (what
	// `mysqlha-agent --version`, `agentctl version` and the member records
	// report) and labels the agent image: a release (make image).
	Version string
}

// ModulePath is the module whose root DefaultCache looks for.
const ModulePath = "github.com/mysqlha/mysqlha"

// RepoRoot walks up from the working directory to the root of the
// github.com/mysqlha/mysqlha module (go test runs in the package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && moduleLine(b) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("images: no go.mod of module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

func moduleLine(gomod []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(gomod)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// DefaultCache is <repo root>/.cache/images.
func DefaultCache() (*Cache, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return &Cache{Dir: filepath.Join(root, ".cache", "images")}, nil
}

// MariaDB builds (or reuses) the MariaDB image in the default cache.
func MariaDB(ctx context.Context) (Image, error) {
	c, err := DefaultCache()
	if err != nil {
		return Image{}, err
	}
	return c.MariaDB(ctx)
}

// Agent builds (or reuses) the agent image of the source tree at repoRoot in
// the default cache.
func Agent(ctx context.Context, repoRoot string) (Image, error) {
	c, err := DefaultCache()
	if err != nil {
		return Image{}, err
	}
	return c.Agent(ctx, repoRoot)
}

func (c *Cache) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf("images: "+format, args...)
	}
}

// lock takes the exclusive file lock <Dir>/<kind>.lock, polling so that ctx
// can end the wait. The lock dies with the process, so a crashed builder
// never leaves it held.
func (c *Cache) lock(ctx context.Context, kind string) (unlock func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, kind+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		if !waited {
			c.logf("waiting for another builder of %s", kind)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return func() { f.Close() }, nil // closing the descriptor releases the lock
}

// tempDir makes a fresh work folder inside Dir (same file system as the
// archives, so a finished file can be renamed into place).
func (c *Cache) tempDir(kind string) (string, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(c.Dir, "tmp-"+kind+"-")
}

// removeStaleTemp removes work folders of kind left by a builder that died;
// the caller holds kind's lock, so none of them is in use.
func (c *Cache) removeStaleTemp(kind string) {
	dirs, _ := filepath.Glob(filepath.Join(c.Dir, "tmp-"+kind+"-*"))
	for _, d := range dirs {
		if err := removeAllNoMounts(d); err != nil {
			c.logf("leaving stale %s: %v", d, err)
		}
	}
}

// removeAllNoMounts is os.RemoveAll that refuses to start when something is
// mounted below dir: a rootfs with a bind-mounted /dev must never be
// deleted through the mount.
func removeAllNoMounts(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mountinfo before removing %s: %w", abs, err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == abs || strings.HasPrefix(f[4], abs+"/")) {
			return fmt.Errorf("not removing %s: %s is mounted", abs, f[4])
		}
	}
	return os.RemoveAll(abs)
}

// exists reports whether path is a regular file; archives only appear under
// their final name once complete.
func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// touch marks a cached file as used, for pruning.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// writeArchive writes img as a docker-archive tagged ref to path, through a
// temporary file renamed into place.
func writeArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parsing image name %s: %w", ref, err)
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// hashKey is a hex sha256 over the parts, each length-prefixed so that
// ("ab","c") and ("a","bc") differ.
func hashKey(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileEntry is one entry of a layer assembled from files known in memory.
type fileEntry struct {
	Name     string // path in the image, no leading slash
	Mode     int64  // permission bits, with setuid/setgid/sticky
	UID, GID int
	Dir      bool
	Body     []byte
}

// epoch is the modification time of generated layer entries: fixed, so the
// same content gives the same layer digest.
var epoch = time.Unix(0, 0).UTC()

func writeEntries(tw *tar.Writer, entries []fileEntry) error {
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
		if e.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name = strings.TrimSuffix(e.Name, "/") + "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Body); err != nil {
			return err
		}
	}
	return nil
}

// writeLayerFile writes a gzip-compressed tar to path, filled by fill.
func writeLayerFile(path string, fill func(tw *tar.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := gzip.NewWriter(bw)
	tw := tar.NewWriter(zw)
	err = fill(tw)
	for _, close := range []func() error{tw.Close, zw.Close, bw.Flush, f.Close} {
		if cerr := close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// writeTree adds the file tree at root to tw with the names relative to
// root, numeric owners only, and hard links kept as links. It skips what
// skip returns true for (a relative path such as "dev/null"); device nodes
// and sockets are always skipped (the container runtime provides /dev).
func writeTree(tw *tar.Writer, root string, skip func(rel string) bool) error {
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat_t", path)
		}
		hdr := &tar.Header{
			Name:    rel,
			Mode:    int64(st.Mode & 0o7777),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: fi.ModTime().Truncate(time.Second),
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case m.IsRegular():
			key := inode{uint64(st.Dev), st.Ino}
			if first, seen := links[key]; seen && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				break
			}
			if st.Nlink > 1 {
				links[key] = rel
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		case m&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
		default:
			return nil // device, socket
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
}

// pruneOld deletes the files matching pattern beyond the keep most recently
// used, when they are also older than minAge (another process may be about
// to import a recent one).
func pruneOld(pattern string, keep int, minAge time.Duration) {
	paths, _ := filepath.Glob(pattern)
	type aged struct {
		path string
		mod  time.Time
	}
	var files []aged
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			files = append(files, aged{p, fi.ModTime()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.After(files[j].mod) })
	for i, f := range files {
		if i >= keep && time.Since(f.mod) > minAge {
			os.RemoveAll(f.path)
		}
	}
}

// LayerSizes returns the compressed size of each layer of the archive,
// which is what is stored and imported.
func LayerSizes(archive string) ([]int64, error) {
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var sizes []int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}
