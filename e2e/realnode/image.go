package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// PauseImage is the sandbox image of the node (containerd's sandbox_image),
// built from the pause command beside this file and imported by Start.
const PauseImage = "localhost/mysqlha/pause:1"

//go:embed pause/main.go
var pauseSource []byte

// ImageFile is one regular file of an image layer.
type ImageFile struct {
	// Path inside the image, absolute ("/pause").
	Path string
	Mode os.FileMode
	Data []byte
}

// WriteImageArchive writes a one-layer image named ref (e.g.
// "localhost/mysqlha/echo:1") holding files, with entrypoint, as a Docker
// archive (the format of `docker save`) that `ctr images import`, and so
// ImportImage, loads. The archive is reproducible: the same input gives the
// same image ID, so importing it again changes nothing.
//
// It is written with the standard library alone: go-containerregistry's
// tarball package needs github.com/opencontainers/go-digest and image-spec,
// which this module's go.mod does not list.
func WriteImageArchive(path, ref string, files []ImageFile, entrypoint []string) error {
	if !strings.Contains(ref, ":") || strings.ContainsAny(ref, " \n\"") {
		return fmt.Errorf("realnode: image reference %q: want name:tag", ref)
	}
	layer, err := layerTar(files)
	if err != nil {
		return fmt.Errorf("realnode: image %s: %w", ref, err)
	}
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])
	// The image config of the Docker/OCI image spec; diff_ids are the
	// digests of the uncompressed layers.
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config":       map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
		"history":      []map[string]any{{"created": time.Unix(0, 0).UTC(), "created_by": "realnode.WriteImageArchive"}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{ref},
		"Layers":   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerHex + "/layer.tar", layer}, {"manifest.json", manifest}} {
		if err := writeTarFile(tw, f.name, 0o644, f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Written whole and renamed, so a reader never sees half an archive.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("realnode: writing image %s: %w", ref, err)
	}
	return os.Rename(tmp, path)
}

// layerTar returns an uncompressed layer with files and their parent
// directories, in a fixed order and with fixed times.
func layerTar(files []ImageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("file path %q: want a clean absolute path", f.Path)
		}
		rel := strings.TrimPrefix(f.Path, "/")
		var parents []string
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		if err := writeTarFile(tw, rel, int64(f.Mode.Perm()), f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeTarFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// BuildGoImage builds the Go main package in srcDir statically
// (CGO_ENABLED=0, GOOS=linux, -trimpath) and writes it with
// WriteImageArchive as the image ref whose only file and entrypoint is
// /<base name of srcDir>. srcDir is built in its own module context: inside
// this repository it uses this module's go.mod, read-only.
func BuildGoImage(ctx context.Context, srcDir, ref, archivePath string) error {
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	name := filepath.Base(abs)
	bin, err := buildStatic(ctx, abs, filepath.Join(filepath.Dir(archivePath), name+".bin"))
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bin)
	_ = os.Remove(bin)
	if err != nil {
		return err
	}
	return WriteImageArchive(archivePath, ref, []ImageFile{{Path: "/" + name, Mode: 0o755, Data: data}}, []string{"/" + name})
}

// buildStatic runs `go build` for the main package in dir into out.
func buildStatic(ctx context.Context, dir, out string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("realnode: the go command is not in PATH: it builds the pause and test images")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if outb, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("realnode: go build in %s: %w\n%s", dir, err, outb)
	}
	return out, nil
}

// writePauseImage builds the embedded pause command in a module of its own
// under workDir and writes PauseImage to archivePath.
func writePauseImage(ctx context.Context, workDir, archivePath string) error {
	src := filepath.Join(workDir, "pause")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module pause\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), pauseSource, 0o644); err != nil {
		return err
	}
	return BuildGoImage(ctx, src, PauseImage, archivePath)
}

// ImportImage loads an image archive (Docker or OCI format, e.g. from
// WriteImageArchive or BuildGoImage) into containerd's k8s.io namespace,
// where the kubelet finds it; pods use it with imagePullPolicy: Never.
//
// It returns once the CRI plugin has taken the images in (it labels them
// io.cri-containerd.image=managed as it processes containerd's events):
// a pod created before that fails with ErrImageNeverPull and waits out the
// kubelet's back-off.
func (n *Node) ImportImage(ctx context.Context, archivePath string) error {
	out, err := n.ctr(ctx, "images", "import", archivePath)
	if err != nil {
		return fmt.Errorf("realnode: importing %s: %w", archivePath, err)
	}
	// "unpacking localhost/mysqlha/pause:1 (sha256:...)...done"
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "unpacking" {
			names = append(names, f[1])
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("realnode: importing %s: no image named in ctr's output: %s", archivePath, out)
	}
	for _, name := range names {
		err := waitUntil(ctx, "the CRI plugin to take in "+name, 20*time.Millisecond, func(ctx context.Context) error {
			ls, err := n.ctr(ctx, "images", "ls", "name=="+name)
			if err == nil && !strings.Contains(ls, "io.cri-containerd.image=managed") {
				err = errors.New("not labelled io.cri-containerd.image=managed yet")
			}
			return err
		}, n.containerd)
		if err != nil {
			return fmt.Errorf("realnode: importing %s: %w", archivePath, err)
		}
	}
	return nil
}

// ctr runs ctr against the node's containerd in the k8s.io namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", n.l.containerdSocket(), "-n", "k8s.io"}, args...)...)
}
