package images

import (
	"archive/tar"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// MariaDBRepository is the name of the MariaDB image, tagged
	// 10.11-<first 12 hex digits of its cache key>.
	MariaDBRepository = "localhost/mysqlha/mariadb"
	// MariaDBUID is the numeric user and group of mysql in the image, as in
	// the official image: give pods fsGroup 999 for a volume at
	// /var/lib/mysql that is not world-writable.
	MariaDBUID = 999

	debianSuite  = "bookworm"
	debianMirror = "http://deb.debian.org/debian"

	// mariadbBaseRecipe is part of the key of the debootstrapped layer:
	// change it whenever buildRootfs or prepareRootfs changes.
	mariadbBaseRecipe = "mariadb-base-v1"
	// mariadbRecipe is part of the image's key: change it whenever the
	// top layer's code or the image config below changes. (The files
	// under rootfs/ are hashed, no need to change it for them.)
	mariadbRecipe = "mariadb-v1"
)

// mariadbPackages is debootstrap's --include list. mariadb-server brings
// mariadbd, mariadb-install-db and, through mariadb-client, the mariadb and
// mariadb-admin clients (probes, preStop) and mariadb-tzinfo-to-sql;
// mariadb-backup brings mariabackup and mbstream, which the agent runs in
// this image for agentctl reinit (as the official image carries them).
var mariadbPackages = []string{"mariadb-server", "mariadb-client", "mariadb-backup", "tzdata"}

// addedFiles are the files of the top layer, at their path in the image.
//
//go:embed all:rootfs
var addedFiles embed.FS

// baseMeta describes a cached debootstrapped layer.
type baseMeta struct {
	// Version is the Debian version of mariadb-server-core, e.g.
	// "1:10.11.18-0+deb12u1"; the image's MARIADB_VERSION.
	Version string
}

// MariaDB returns the MariaDB 10.11 image, building it on first use: a
// layer debootstrapped from Debian bookworm (cached apart, so that editing
// the entrypoint rebuilds in seconds) plus a layer with the files under
// e2e/images/rootfs.
//
// Contract, what deploy/ may rely on; it matches the official mariadb:10.11
// image for these points:
//   - ENTRYPOINT /usr/local/bin/docker-entrypoint.sh, CMD mariadbd; args
//     starting with '-' are mariadbd's; mariadbd runs as PID 1 (exec).
//   - USER 999:999 (mysql). Started as root instead, the entrypoint chowns
//     the datadir and re-executes itself as mysql (setpriv, not gosu). A
//     datadir owned by root with group 999 writable (fsGroup) works.
//   - /var/lib/mysql without a mysql/ folder is initialised:
//     mariadb-install-db --auth-root-authentication-method=normal (with the
//     server's args, binary log off), a temporary server with
//     --skip-networking on the socket, then: time zones (unless
//     MARIADB_INITDB_SKIP_TZINFO), root@localhost's password and
//     root@MARIADB_ROOT_HOST (default '%') with ALL and GRANT OPTION, both
//     unlogged; MARIADB_DATABASE; MARIADB_USER/MARIADB_PASSWORD with ALL on
//     that database; then /docker-entrypoint-initdb.d/* in name order: *.sh
//     executed if executable, else sourced; *.sql, *.sql.gz (*.sql.xz,
//     *.sql.zst only if xz/zstd are present) through docker_process_sql.
//     These statements run with the server's args, so with --log-bin they
//     are in the binary log, as in the official image (start a .sql file
//     with SET sql_log_bin=0 to keep them out).
//   - Passwords: MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD,
//     MARIADB_RANDOM_ROOT_PASSWORD, each also as MYSQL_*; MARIADB_ROOT_PASSWORD,
//     MARIADB_ROOT_HOST, MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD also
//     as *_FILE.
//   - Sourced scripts get the official helpers: docker_process_sql
//     [--dont-use-mysql-root-password] [client args] (SQL on stdin, as root
//     on the socket, password in MYSQL_PWD, in MARIADB_DATABASE when set),
//     docker_exec_client, docker_sql_escape_string_literal, file_env,
//     mysql_note/mysql_warn/mysql_error, mysql_check_config, mysql_get_config,
//     the array mysql=(docker_process_sql) and DATADIR, SOCKET, PORT. Executed scripts get the exported
//     environment only (MARIADB_*/MYSQL_*), as in the official image.
//   - Configuration: /etc/mysql/my.cnf reads /etc/mysql/mariadb.conf.d/*.cnf
//     and then /etc/mysql/conf.d/*.cnf, so a snippet an init container drops
//     in conf.d (server_id...) wins. bind-address, log* and user lines of
//     Debian's files are commented out (listen on all addresses, log to
//     stderr); skip-name-resolve and host-cache-size=0 are set. Socket
//     /run/mysqld/mysqld.sock, port 3306. The root file system must be
//     writable (/run/mysqld, /tmp).
//
// Not supported, and rejected with an error when set: the *_PASSWORD_HASH
// variables, MARIADB_REPLICATION_*/MARIADB_MASTER_*,
// MARIADB_MYSQL_LOCALHOST_USER, MARIADB_HEALTHCHECK_GRANTS. Not present:
// healthcheck.sh and its healthcheck@ users and .my-healthcheck.cnf,
// restoring /docker-entrypoint-initdb.d/*.tar.* backups (mariabackup is
// there, for the agent, but the entrypoint does not restore),
// mariadb-upgrade on a version change (MARIADB_AUTO_UPGRADE is ignored), gosu,
// pwgen, jemalloc. The packages are bookworm's (no bookworm-security), not
// MariaDB's own builds: the patch version (10.11.x) may differ from the
// official image's.
func (c *Cache) MariaDB(ctx context.Context) (Image, error) {
	start := time.Now()
	baseKey := hashKey([]byte(mariadbBaseRecipe), []byte(debianSuite), []byte(debianMirror),
		[]byte(strings.Join(mariadbPackages, ",")))
	added, err := addedEntries()
	if err != nil {
		return Image{}, err
	}
	keyParts := [][]byte{[]byte(mariadbRecipe), []byte(baseKey)}
	for _, e := range added {
		keyParts = append(keyParts, []byte(e.Name), fmt.Appendf(nil, "%o:%d:%d:%t", e.Mode, e.UID, e.GID, e.Dir), e.Body)
	}
	key := hashKey(keyParts...)
	img := Image{
		Ref:     MariaDBRepository + ":10.11-" + key[:12],
		Archive: filepath.Join(c.Dir, "mariadb-10.11-"+key[:12]+".tar"),
	}
	if exists(img.Archive) {
		touch(img.Archive)
		return img, nil
	}

	unlock, err := c.lock(ctx, "mariadb")
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if exists(img.Archive) {
		return img, nil
	}
	c.removeStaleTemp("mariadb")
	baseDir, meta, err := c.mariadbBase(ctx, baseKey)
	if err != nil {
		return Image{}, err
	}
	work, err := c.tempDir("mariadb")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)
	topPath := filepath.Join(work, "top.tar.gz")
	if err := writeLayerFile(topPath, func(tw *tar.Writer) error { return writeEntries(tw, added) }); err != nil {
		return Image{}, fmt.Errorf("writing the top layer: %w", err)
	}
	var layers []v1.Layer
	for _, p := range []string{filepath.Join(baseDir, "layer.tar.gz"), topPath} {
		l, err := tarball.LayerFromFile(p)
		if err != nil {
			return Image{}, err
		}
		layers = append(layers, l)
	}
	withLayers, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return Image{}, err
	}
	image, err := withConfig(withLayers, v1.Config{
		Entrypoint: []string{"/usr/local/bin/docker-entrypoint.sh"},
		Cmd:        []string{"mariadbd"},
		User:       fmt.Sprintf("%d:%d", MariaDBUID, MariaDBUID),
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LANG=C.UTF-8",
			"MARIADB_VERSION=" + meta.Version,
		},
		ExposedPorts: map[string]struct{}{"3306/tcp": {}},
		Volumes:      map[string]struct{}{"/var/lib/mysql": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "mysqlha e2e MariaDB (Debian " + debianSuite + ")",
			"org.opencontainers.image.version": meta.Version,
		},
	})
	if err != nil {
		return Image{}, err
	}
	c.logf("writing %s", img.Archive)
	if err := writeArchive(img.Archive, img.Ref, image); err != nil {
		return Image{}, err
	}
	pruneOld(filepath.Join(c.Dir, "mariadb-10.11-*.tar"), 2, time.Hour)
	pruneOld(filepath.Join(c.Dir, "mariadb-base-*"), 2, time.Hour)
	c.logf("mariadb %s built in %.1fs", img.Ref, time.Since(start).Seconds())
	return img, nil
}

// addedEntries is the top layer: the embedded files (executable under
// usr/local/bin), the init folder, an empty datadir and the socket folder.
func addedEntries() ([]fileEntry, error) {
	entries := []fileEntry{
		{Name: "docker-entrypoint-initdb.d", Mode: 0o755, Dir: true},
		// The official image's modes; the datadir is usually a volume.
		{Name: "run/mysqld", Mode: 0o777, UID: MariaDBUID, GID: MariaDBUID, Dir: true},
		{Name: "var/lib/mysql", Mode: 0o755, UID: MariaDBUID, GID: MariaDBUID, Dir: true},
	}
	err := fs.WalkDir(addedFiles, "rootfs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := addedFiles.ReadFile(path)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, "rootfs/")
		mode := int64(0o644)
		if strings.HasPrefix(rel, "usr/local/bin/") {
			mode = 0o755
		}
		entries = append(entries, fileEntry{Name: rel, Mode: mode, Body: body})
		return nil
	})
	return entries, err
}

// mariadbBase returns the folder holding the debootstrapped layer
// (layer.tar.gz) of key, building it when missing. The caller holds the
// mariadb lock.
func (c *Cache) mariadbBase(ctx context.Context, key string) (string, baseMeta, error) {
	dir := filepath.Join(c.Dir, "mariadb-base-"+key[:12])
	var meta baseMeta
	if b, err := os.ReadFile(filepath.Join(dir, "meta.json")); err == nil {
		if err := json.Unmarshal(b, &meta); err != nil {
			return "", meta, fmt.Errorf("reading %s/meta.json: %w", dir, err)
		}
		touch(dir)
		return dir, meta, nil
	}
	start := time.Now()
	work, err := c.tempDir("mariadb")
	if err != nil {
		return "", meta, err
	}
	defer func() {
		if err := removeAllNoMounts(work); err != nil {
			c.logf("%v", err)
		}
	}()
	root := filepath.Join(work, "rootfs")
	if err := c.buildRootfs(ctx, root); err != nil {
		return "", meta, err
	}
	c.logf("debootstrap done in %.0fs", time.Since(start).Seconds())
	if meta, err = prepareRootfs(root); err != nil {
		return "", meta, fmt.Errorf("preparing the MariaDB rootfs: %w", err)
	}
	out := filepath.Join(work, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return "", meta, err
	}
	if err := writeLayerFile(filepath.Join(out, "layer.tar.gz"), func(tw *tar.Writer) error {
		return writeTree(tw, root, func(rel string) bool {
			// Filled by the runtime in a container.
			return strings.HasPrefix(rel, "dev/") || strings.HasPrefix(rel, "proc/") || strings.HasPrefix(rel, "sys/")
		})
	}); err != nil {
		return "", meta, fmt.Errorf("writing the MariaDB base layer: %w", err)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", meta, err
	}
	if err := os.WriteFile(filepath.Join(out, "meta.json"), b, 0o644); err != nil {
		return "", meta, err
	}
	if err := os.Rename(out, dir); err != nil {
		return "", meta, err
	}
	c.logf("mariadb base layer (MariaDB %s) built in %.0fs", meta.Version, time.Since(start).Seconds())
	return dir, meta, nil
}
