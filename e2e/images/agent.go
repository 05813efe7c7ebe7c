package images

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// AgentRepository is the name of the agent image, tagged with the first
	// 12 hex digits of its cache key.
	AgentRepository = "localhost/mysqlha/agent"
	// AgentUID is the numeric user (and group) the agent runs as, like
	// distroless's nonroot in deploy/Dockerfile.
	AgentUID = 65532
	// agentRecipe is part of the agent's cache key: change it whenever the
	// layout or config below changes.
	agentRecipe = "agent-v3"
)

// agentBinaries maps each product package to its path in the image.
var agentBinaries = []struct{ pkg, path string }{
	{"./cmd/agent", "usr/local/bin/mysqlha-agent"},
	{"./cmd/agentctl", "usr/local/bin/agentctl"},
	// deploy/ runs the agent in the server's image: an init container
	// copies the two above into a volume with this.
	{"./cmd/mysqlha-copy", "usr/local/bin/mysqlha-copy"},
}

// Agent builds the agent and agentctl of the source tree at repoRoot
// (CGO_ENABLED=0, -trimpath, stripped) and returns the image holding them, cached
// under the hash of the binaries: an unchanged tree costs one cached go build.
func (c *Cache) Agent(ctx context.Context, repoRoot string) (Image, error) {
	start := time.Now()
	work, err := c.tempDir("agentbuild")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)

	// -s -w: no symbol table nor DWARF (stack traces keep names and
	// lines); a third smaller and a faster link than deploy/Dockerfile's.
	ldflags := "-s -w"
	if c.Version != "" {
		ldflags += " -X " + ModulePath + "/internal/version.Version=" + c.Version
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + ldflags, "-o", work + "/"}
	for _, b := range agentBinaries {
		args = append(args, b.pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("building the agent in %s: %w\n%s", repoRoot, err, out)
	}
	var entries []fileEntry
	for _, dir := range []string{"etc", "home", "home/nonroot", "tmp", "usr", "usr/local", "usr/local/bin"} {
		e := fileEntry{Name: dir, Mode: 0o755, Dir: true}
		switch dir {
		case "tmp":
			e.Mode = 0o1777
		case "home/nonroot":
			e.Mode, e.UID, e.GID = 0o700, AgentUID, AgentUID
		}
		entries = append(entries, e)
	}
	entries = append(entries,
		fileEntry{Name: "etc/passwd", Mode: 0o644, Body: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", AgentUID, AgentUID)},
		fileEntry{Name: "etc/group", Mode: 0o644, Body: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", AgentUID)},
	)
	keyParts := [][]byte{[]byte(agentRecipe)}
	for _, b := range agentBinaries {
		body, err := os.ReadFile(filepath.Join(work, filepath.Base(b.pkg)))
		if err != nil {
			return Image{}, fmt.Errorf("reading the built %s: %w", b.pkg, err)
		}
		entries = append(entries, fileEntry{Name: b.path, Mode: 0o755, Body: body})
	}
	for _, e := range entries {
		keyParts = append(keyParts, []byte(e.Name), fmt.Appendf(nil, "%o:%d:%d", e.Mode, e.UID, e.GID), e.Body)
	}
	key := hashKey(keyParts...)
	img := Image{
		Ref:     AgentRepository + ":" + key[:12],
		Archive: filepath.Join(c.Dir, "agent-"+key[:12]+".tar"),
	}
	if exists(img.Archive) {
		touch(img.Archive)
		c.logf("agent %s cached (%.1fs with go build)", img.Ref, time.Since(start).Seconds())
		return img, nil
	}

	unlock, err := c.lock(ctx, "agent")
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if exists(img.Archive) { // built by another caller while we waited
		return img, nil
	}
	layerPath := filepath.Join(work, "layer.tar.gz")
	if err := writeLayerFile(layerPath, func(tw *tar.Writer) error { return writeEntries(tw, entries) }); err != nil {
		return Image{}, fmt.Errorf("writing the agent layer: %w", err)
	}
	layer, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return Image{}, err
	}
	base, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return Image{}, err
	}
	image, err := withConfig(base, v1.Config{
		Entrypoint:   []string{"/usr/local/bin/mysqlha-agent"},
		User:         fmt.Sprintf("%d:%d", AgentUID, AgentUID),
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir:   "/home/nonroot",
		ExposedPorts: map[string]struct{}{"8008/tcp": {}},
		Labels:       agentLabels(c.Version),
	})
	if err != nil {
		return Image{}, err
	}
	if err := writeArchive(img.Archive, img.Ref, image); err != nil {
		return Image{}, err
	}
	// An archive per source change adds up: keep the recent ones.
	pruneOld(filepath.Join(c.Dir, "agent-*.tar"), 4, time.Hour)
	c.logf("agent %s built in %.1fs", img.Ref, time.Since(start).Seconds())
	return img, nil
}

// agentLabels are the agent image's OCI annotations; the version only for
// a release build.
func agentLabels(version string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "mysqlha-agent",
		"org.opencontainers.image.source":   "https://" + ModulePath,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if version != "" {
		l["org.opencontainers.image.version"] = version
	}
	return l
}

// withConfig sets the runtime config and the platform: containerd matches
// the image's os/architecture against the node's when it unpacks it.
func withConfig(img v1.Image, cfg v1.Config) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = cfg
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}
