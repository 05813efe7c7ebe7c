package ctl

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readReport returns the files of the report at path, by name within its
// directory.
func readReport(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		dir, name, _ := strings.Cut(hdr.Name, "/")
		if dir != "report" {
			t.Errorf("%s is not under the report's directory", hdr.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
}

// The report holds the DCS's view, each agent's /status, the logs and
// Events; a source that fails leaves a file saying why; the token it used
// appears nowhere.
func TestReportHoldsEverythingButSecrets(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const token = "0123456789abcdef-the-api-token"
	src := ReportSources{
		MemberStatus: func(_ context.Context, apiURL string) ([]byte, error) {
			return []byte(`{"url": "` + apiURL + `", "echoed": "` + token + `"}`), nil
		},
		AgentLog: func(_ context.Context, pod string) ([]byte, error) {
			if pod == "db2" {
				return nil, errors.New("pods \"db2\" is forbidden")
			}
			return []byte(`{"msg":"role changed","member":"` + pod + `"}` + "\n"), nil
		},
		Events: func(_ context.Context, members []string) ([]byte, error) {
			return []byte(`[{"reason":"Promoted","of":"` + strings.Join(members, ",") + `"}]`), nil
		},
		Pods:    func(context.Context) ([]byte, error) { return []byte(`[{"name":"db1","restarts":0}]`), nil },
		Secrets: []string{token},
	}
	path := filepath.Join(t.TempDir(), "report.tar.gz")
	if err := f.cli.Report(ctx, path, src); err != nil {
		t.Fatal(err)
	}
	files := readReport(t, path)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"README.txt", "agents/db1-status.json", "agents/db2-status.json", "agents/db3-status.json",
		"config.json", "events.json", "history.json", "logs/db1-agent.log", "logs/db2-agent.log.error", "logs/db3-agent.log",
		"members/db1.json", "members/db2.json", "members/db3.json", "pods.json", "status.json", "status.txt", "versions.json"}
	if !slices.Equal(names, want) {
		t.Fatalf("report files %q, want %q", names, want)
	}
	for name, body := range files {
		if strings.Contains(body, token) {
			t.Errorf("%s contains the API token", name)
		}
	}
	for name, want := range map[string]string{
		"status.txt":               "Cluster: demo   Leader: db1",
		"members/db3.json":         `"gtid": "0-1-97"`,
		"agents/db2-status.json":   `"echoed": "<redacted>"`,
		"logs/db2-agent.log.error": `pods "db2" is forbidden`,
		"README.txt":               "mysqlha support report of cluster demo",
		"events.json":              `"of":"db1,db2,db3"`,
		"versions.json":            `"db1"`,
	} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q:\n%s", name, want, files[name])
		}
	}
	if !strings.Contains(f.out.String(), "Wrote "+path) || !strings.Contains(f.out.String(), "logs/db2-agent.log.error") {
		t.Errorf("report printed %q, want the file and its list", f.out.String())
	}
}

// On etcd, without a token: the DCS's view only, and the README says what
// was left out and why.
func TestReportWithoutSources(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "report.tar.gz")
	if err := f.cli.Report(context.Background(), path, ReportSources{}); err != nil {
		t.Fatal(err)
	}
	files := readReport(t, path)
	if _, ok := files["events.json"]; ok || len(files) != 9 {
		t.Errorf("files %v, want the DCS's view alone (9)", len(files))
	}
	if !strings.Contains(files["README.txt"], "give --api-token-file") {
		t.Errorf("README.txt does not say how to include the agents' status:\n%s", files["README.txt"])
	}
}
