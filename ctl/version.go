package ctl

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
)

// VersionView is what `agentctl version` shows: agentctl's build and,
// when the DCS can be read, the agent version every member published.
type VersionView struct {
	Client    string          `json:"client"`
	GoVersion string          `json:"go"`
	Members   []MemberVersion `json:"members,omitempty"`
	// Unreachable says why the members' versions are missing.
	Unreachable string `json:"members_unknown,omitempty"`
}

// MemberVersion is one member's agent version; "" from an agent older
// than the field.
type MemberVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Version prints client and, unless unreachable says why the DCS cannot be
// read (then c.Store may be nil), each member's agent version. An
// unreadable DCS is reported in the output, not as a failure: the client's
// version is still worth printing.
func (c *CLI) Version(ctx context.Context, f Format, client string, unreachable error) error {
	v := VersionView{Client: client, GoVersion: runtime.Version()}
	if unreachable == nil {
		unreachable = c.memberVersions(ctx, &v)
	}
	if unreachable != nil {
		v.Unreachable = unreachable.Error()
	}
	return c.write(f, v, v.WriteTable)
}

func (c *CLI) memberVersions(ctx context.Context, v *VersionView) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	for _, m := range cl.Members {
		v.Members = append(v.Members, MemberVersion{Name: m.Name, Version: m.AgentVersion})
	}
	return nil
}

// WriteTable prints the client's version, then a member per line.
func (v VersionView) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "Client: %s (%s)\n", v.Client, v.GoVersion)
	if v.Unreachable != "" {
		fmt.Fprintf(w, "Members: unknown (%s)\n", v.Unreachable)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tAGENT VERSION")
	for _, m := range v.Members {
		fmt.Fprintf(tw, "%s\t%s\n", m.Name, agentVersion(m.Version))
	}
	tw.Flush()
}

// agentVersion shows the version of an agent older than the field as such.
func agentVersion(v string) string {
	if v == "" {
		return "unknown (an agent older than the version field)"
	}
	return v
}
