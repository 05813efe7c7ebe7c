// Command release-images builds a release's two container images on this
// machine, without Docker or a registry, with the builder the real-node
// tests use (e2e/images): the agent image (mysqlha-agent, agentctl and
// mysqlha-copy, the version linked in) and the MariaDB 10.11 image from
// Debian packages (root and debootstrap needed). Each is written as an OCI
// archive (an OCI image layout in a tar), which `skopeo copy
// oci-archive:FILE docker://REGISTRY/NAME:TAG` pushes and `ctr images
// import` loads.
//
//	go run ./tools/release-images --version=v1.2.3 --out=bin/images
package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mysqlha/mysqlha/e2e/images"
)

func main() {
	version := flag.String("version", "", "the release's version, as `git describe --tags` prints it (v1.2.3)")
	out := flag.String("out", "bin/images", "directory the OCI archives are written to")
	flag.Parse()
	if err := run(context.Background(), *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "release-images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, out string) error {
	if version == "" {
		return errors.New("--version is required (make image passes `git describe --tags --always --dirty`)")
	}
	root, err := images.RepoRoot()
	if err != nil {
		return err
	}
	c, err := images.DefaultCache()
	if err != nil {
		return err
	}
	c.Version = version
	c.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	agent, err := c.Agent(ctx, root)
	if err != nil {
		return err
	}
	mariadb, err := c.MariaDB(ctx)
	if err != nil {
		return err
	}
	for _, img := range []struct {
		built     images.Image
		file, ref string
	}{
		{agent, "mysqlha-agent-" + version + ".oci.tar", "mysqlha-agent:" + version},
		{mariadb, "mysqlha-mariadb-10.11-" + version + ".oci.tar", "mysqlha-mariadb:10.11-" + version},
	} {
		path := filepath.Join(out, img.file)
		if err := toOCIArchive(img.built.Archive, img.built.Ref, img.ref, path); err != nil {
			return fmt.Errorf("%s: %w", img.file, err)
		}
		fmt.Printf("wrote %s (%s)\n", path, img.ref)
	}
	return nil
}

// toOCIArchive writes the image that the docker-archive at archive holds
// under ref as an OCI archive at path, naming it refName (the annotation
// org.opencontainers.image.ref.name, which skopeo and ctr read).
func toOCIArchive(archive, ref, refName, path string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName})); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// tarDir writes the files under dir, relative to it, as a tar at path.
func tarDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		if hdr.Name, err = filepath.Rel(dir, p); err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil || d.IsDir() {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
