package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// An image written as a docker-archive comes out as an OCI archive holding
// the same image (same digest), named by the ref annotation.
func TestToOCIArchive(t *testing.T) {
	dir := t.TempDir()
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("localhost/mysqlha/agent:abc")
	archive := filepath.Join(dir, "docker.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "agent.oci.tar")
	if err := toOCIArchive(archive, tag.String(), "mysqlha-agent:v1.2.3", out); err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(dir, "unpacked")
	untar(t, out, unpacked)
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index %+v (%v), want one image", m, err)
	}
	want, _ := img.Digest()
	if d := m.Manifests[0]; d.Digest != want || d.Annotations["org.opencontainers.image.ref.name"] != "mysqlha-agent:v1.2.3" {
		t.Errorf("manifest %+v, want digest %s named mysqlha-agent:v1.2.3", d, want)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
