package ctl

import (
	"fmt"
	"io"
)

// Result is what a command that changes the cluster prints with -o json or
// yaml: one object on stdout that a script can read, while the prose the
// table output shows goes to stderr.
type Result struct {
	Command string `json:"command"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	// Primary is the new primary, once --wait saw it accept writes.
	Primary string `json:"primary,omitempty"`
	// Paused is the cluster's maintenance mode after pause or resume.
	Paused *bool  `json:"paused,omitempty"`
	Member string `json:"member,omitempty"`
	// Changes are the config settings changed, "key: old -> new".
	Changes []string `json:"changes,omitempty"`
	Message string   `json:"message"`
}

// machine reports whether the output is for scripts (-o json or yaml).
func (c *CLI) machine() bool { return c.Output == JSON || c.Output == YAML }

// errOut is where prompts go: stderr, so that stdout stays the command's
// output when piped.
func (c *CLI) errOut() io.Writer {
	if c.Err != nil {
		return c.Err
	}
	return io.Discard
}

// say prints a line of prose: on stdout in table output, on stderr when
// stdout is reserved for the -o json|yaml result.
func (c *CLI) say(format string, args ...any) {
	w := c.Out
	if c.machine() {
		w = c.errOut()
	}
	fmt.Fprintf(w, format, args...)
}

// finish prints r with -o json or yaml; in table output say already told.
func (c *CLI) finish(r Result) error {
	if !c.machine() {
		return nil
	}
	return c.write(c.Output, r, nil)
}
