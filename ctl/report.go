package ctl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/internal/version"
)

// ReportSources are what `agentctl report` reads beyond the DCS; each is
// nil where it is not available (etcd has no Events nor pod logs; without
// --api-token-file the agents' /status is not asked).
type ReportSources struct {
	// Events is the Kubernetes Events of the members' pods and of the
	// cluster's Leases.
	Events func(ctx context.Context, members []string) ([]byte, error)
	// Pods is the state of the cluster's pods (phase, restarts, node).
	Pods func(ctx context.Context) ([]byte, error)
	// AgentLog is the recent log of the agent container of pod.
	AgentLog func(ctx context.Context, pod string) ([]byte, error)
	// MemberStatus is GET /status of the agent at apiURL.
	MemberStatus func(ctx context.Context, apiURL string) ([]byte, error)
	// Secrets are values that must not appear in the report (the API
	// token it used): each is replaced by "<redacted>" in every file.
	Secrets []string
}

// reportFile is one file of the report, or why it could not be made.
type reportFile struct {
	name string
	body []byte
}

// Report writes a support bundle for the cluster to path (a .tar.gz):
// status, history, config, each member's record and, where the sources
// allow, each agent's /status, the Events, the pods and the agents' logs,
// with agentctl's and the agents' versions. A source that fails leaves a
// file saying why, never a failed report. It prints the files it wrote.
func (c *CLI) Report(ctx context.Context, path string, src ReportSources) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	var files []reportFile
	add := func(name string, get func() ([]byte, error)) {
		body, err := get()
		if err != nil {
			name, body = name+".error", []byte(err.Error()+"\n")
		}
		files = append(files, reportFile{name, body})
	}
	// The DCS's view, through the commands' own JSON.
	sub := func(run func(c *CLI) error) func() ([]byte, error) {
		return func() ([]byte, error) {
			var buf bytes.Buffer
			cc := *c
			cc.Out, cc.Err, cc.Output = &buf, nil, JSON
			err := run(&cc)
			return buf.Bytes(), err
		}
	}
	add("status.json", sub(func(c *CLI) error { return c.Status(ctx, JSON, false) }))
	add("status.txt", sub(func(c *CLI) error { return c.Status(ctx, Table, false) }))
	add("history.json", sub(func(c *CLI) error { return c.History(ctx, JSON) }))
	add("config.json", sub(func(c *CLI) error { return c.ShowConfig(ctx, JSON) }))
	add("versions.json", sub(func(c *CLI) error { return c.Version(ctx, JSON, version.Get(), nil) }))
	for _, m := range cl.Members {
		add("members/"+m.Name+".json", sub(func(c *CLI) error { return c.Describe(ctx, JSON, m.Name) }))
	}
	for _, m := range cl.Members {
		if src.MemberStatus != nil && m.APIURL != "" {
			add("agents/"+m.Name+"-status.json", c.source(ctx, func(ctx context.Context) ([]byte, error) { return src.MemberStatus(ctx, m.APIURL) }))
		}
		if src.AgentLog != nil {
			add("logs/"+m.Name+"-agent.log", c.source(ctx, func(ctx context.Context) ([]byte, error) { return src.AgentLog(ctx, m.Name) }))
		}
	}
	if src.Events != nil {
		var members []string
		for _, m := range cl.Members {
			members = append(members, m.Name)
		}
		add("events.json", c.source(ctx, func(ctx context.Context) ([]byte, error) { return src.Events(ctx, members) }))
	}
	if src.Pods != nil {
		add("pods.json", c.source(ctx, src.Pods))
	}
	names := make([]string, 0, len(files)+1)
	for _, f := range files {
		names = append(names, f.name)
	}
	files = append([]reportFile{{"README.txt", reportReadme(cl.Name, names, src)}}, files...)
	for i := range files {
		files[i].body = redact(files[i].body, src.Secrets)
	}
	if err := writeReport(path, files); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	c.say("Wrote %s:\n", path)
	for _, f := range files {
		c.say("  %s (%d bytes)\n", f.name, len(f.body))
	}
	return c.finish(Result{Command: "report", Message: "wrote " + path})
}

// source is get, run within the command's timeout, its body's length
// bounded (the end kept): a report is read by people.
func (c *CLI) source(ctx context.Context, get func(ctx context.Context) ([]byte, error)) func() ([]byte, error) {
	return func() ([]byte, error) {
		ctx, cancel := c.bounded(ctx)
		defer cancel()
		body, err := get(ctx)
		if len(body) > maxReportFile {
			body = append([]byte(fmt.Sprintf("[first %d bytes cut]\n", len(body)-maxReportFile)), body[len(body)-maxReportFile:]...)
		}
		return body, err
	}
}

// maxReportFile bounds each file of a report (the end of a log is kept).
const maxReportFile = 8 << 20

func redact(body []byte, secrets []string) []byte {
	for _, s := range secrets {
		if s != "" {
			body = bytes.ReplaceAll(body, []byte(s), []byte("<redacted>"))
		}
	}
	return body
}

func reportReadme(cluster string, names []string, src ReportSources) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "mysqlha support report of cluster %s, made %s by agentctl %s.\n\n",
		cluster, time.Now().UTC().Format(time.RFC3339), version.Get())
	b.WriteString("status, history, config, versions and members/ are the DCS's view (agentctl's JSON).\n")
	b.WriteString("A file NAME.error says why NAME could not be read.\n")
	var skipped []string
	if src.MemberStatus == nil {
		skipped = append(skipped, "agents/ (each agent's /status: give --api-token-file)")
	}
	if src.AgentLog == nil {
		skipped = append(skipped, "logs/ (the agents' logs: Kubernetes only)")
	}
	if src.Events == nil {
		skipped = append(skipped, "events.json and pods.json (Kubernetes only)")
	}
	if len(skipped) > 0 {
		b.WriteString("Not included: " + strings.Join(skipped, "; ") + ".\n")
	}
	b.WriteString("No password, token or key is included; the API token used is replaced by <redacted>.\n\nFiles:\n")
	for _, n := range slices.Sorted(slices.Values(names)) {
		b.WriteString("  " + n + "\n")
	}
	return []byte(b.String())
}

// writeReport writes files as a gzipped tar at path, all at once: a
// report cut short by an error is not left behind.
func writeReport(path string, files []reportFile) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	now := time.Now()
	for _, f := range files {
		hdr := &tar.Header{Name: dir + "/" + f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}
