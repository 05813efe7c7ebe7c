package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// ConfigView is the cluster config as `agentctl show-config -o json|yaml`
// prints it: one object, a key per setting (dcs.SettingKeys), durations and
// modes as strings, switches as booleans.
type ConfigView []dcs.Setting

// MarshalJSON writes the settings as one object in their fixed order.
func (v ConfigView) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, s := range v {
		val, err := json.Marshal(s.Value)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", s.Key, val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// unreadableConfig is the failure, with code, of a command that needs the
// stored config while it cannot be read.
func unreadableConfig(cl *dcs.Cluster, code int) error {
	return fail(code, "the stored cluster config cannot be read (%v); the agents keep the last good config they read. "+
		"Replace the whole config with `agentctl edit-config`, which then starts from the defaults", cl.ConfigErr)
}

// ShowConfig prints the stored cluster config: the settings every agent
// follows.
func (c *CLI) ShowConfig(ctx context.Context, f Format) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	if cl.ConfigErr != nil {
		return unreadableConfig(cl, ExitError)
	}
	v := ConfigView(cl.Config.Settings())
	return c.write(f, v, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tVALUE\tMEANING")
		for _, s := range v {
			fmt.Fprintf(tw, "%s\t%v\t%s\n", s.Key, s.Value, s.Help)
		}
		tw.Flush()
		if cl.ConfigVersion == "" {
			fmt.Fprintln(w, "Not stored yet: the defaults, until the first member bootstraps the cluster.")
		}
	})
}

// SetConfig applies key=value assignments to the stored cluster config. All
// of them are checked, then validated together by the rule the agents
// check at start-up, then written in one compare-and-set together with
// their history entry: either every change lands or none does. The agents
// apply it at their next loop iteration.
func (c *CLI) SetConfig(ctx context.Context, assignments []string, create bool) error {
	if len(assignments) == 0 {
		return fail(ExitUsage, "set-config needs at least one key=value; the keys are %s", strings.Join(dcs.SettingKeys(), ", "))
	}
	cl, err := c.configTarget(ctx, create)
	if err != nil {
		return err
	}
	if cl.ConfigErr != nil {
		// Settings it does not name would be taken from this machine's
		// fallback, not from what the cluster runs with.
		return unreadableConfig(cl, ExitRejected)
	}
	next, err := assign(cl.Config, assignments)
	if err != nil {
		return err
	}
	return c.applyConfig(ctx, "set-config", cl.Config, next, cl.ConfigVersion, false)
}

// configTarget reads the cluster whose config command changes. Only with
// create may that cluster be new: the agents' bootstrap flags seed a
// cluster's config, and a config stored first (under a mistyped name, say)
// would win over them.
func (c *CLI) configTarget(ctx context.Context, create bool) (*dcs.Cluster, error) {
	cl, err := c.read(ctx)
	switch {
	case err != nil || cl.Exists():
		return cl, err
	case !create:
		return nil, c.unknownCluster(ctx, cl.Name, "to store the config of a cluster whose agents have not started yet, give --create")
	}
	c.say("Creating the config of cluster %q, which has no member yet: it wins over the agents' bootstrap flags.\n", cl.Name)
	return cl, nil
}

// assign returns cfg with every key=value of assignments set.
func assign(cfg dcs.Config, assignments []string) (dcs.Config, error) {
	seen := map[string]bool{}
	for _, a := range assignments {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return cfg, fail(ExitUsage, "%q: want key=value, such as ttl=10s; nothing was changed", a)
		}
		if seen[k] {
			return cfg, fail(ExitUsage, "%s is given twice; nothing was changed", k)
		}
		seen[k] = true
		if err := cfg.Set(k, v); err != nil {
			return cfg, fail(ExitUsage, "%v; nothing was changed", err)
		}
	}
	return cfg, nil
}

// applyConfig validates next and writes it over old, which was stored at
// version, with its history entry, for command. replacing: the stored
// config cannot be read and old is the defaults, so next is written even
// when equal to it.
func (c *CLI) applyConfig(ctx context.Context, command string, old, next dcs.Config, version string, replacing bool) error {
	changes := old.Changes(next)
	if len(changes) == 0 && !replacing {
		c.say("No change: the stored config already has these values.\n")
		return c.finish(Result{Command: command, Message: "no change"})
	}
	if err := next.Validate(); err != nil {
		return fail(ExitUsage, "invalid cluster config, nothing was changed:\n%v", err)
	}
	reason := changeReason(changes, replacing)
	e := dcs.HistoryEntry{Kind: dcs.HistoryConfig, At: time.Now(), Reason: reason}
	wctx, cancel := c.bounded(ctx)
	defer cancel()
	err := c.Store.ChangeConfig(wctx, next, version, e)
	switch {
	case errors.Is(err, dcs.ErrConflict):
		return fail(ExitRejected, "the cluster config changed while agentctl was changing it (%v); nothing was changed: "+
			"check `agentctl show-config` and run the command again", err)
	case errors.Is(err, dcs.ErrInvalid):
		return fail(ExitUsage, "invalid cluster config, nothing was changed:\n%v", err)
	case err != nil:
		return fmt.Errorf("writing the cluster config: %w", err)
	}
	c.say("Changed the cluster config: %s.\nThe agents apply it at their next loop iteration, without a restart.\n", reason)
	return c.finish(Result{Command: command, Changes: changes, Message: "changed the cluster config: " + reason})
}

// changeReason says what a config write changes, as its history entry's
// reason: every changed setting with its old and new value.
func changeReason(changes []string, replacing bool) string {
	reason := strings.Join(changes, ", ")
	switch {
	case !replacing:
		return reason
	case reason == "":
		return "replaced an unreadable config with the defaults"
	}
	return "replaced an unreadable config with the defaults, then " + reason
}

// EditConfig opens the stored cluster config in an editor (c.Editor) and
// applies what was saved as SetConfig does, after a confirmation unless
// force. A stored config that cannot be read is replaced: the editor then
// starts from the defaults.
func (c *CLI) EditConfig(ctx context.Context, force, create bool) error {
	if c.Editor == nil {
		return fail(ExitUsage, "edit-config needs an editor: set $VISUAL or $EDITOR")
	}
	cl, err := c.configTarget(ctx, create)
	if err != nil {
		return err
	}
	old, note := cl.Config, ""
	if cl.ConfigErr != nil {
		old, note = dcs.DefaultConfig(), fmt.Sprintf("The stored config cannot be read (%v):\nthese are the defaults, to replace it.", cl.ConfigErr)
	}
	edited, err := c.editSettings(old, note)
	if err != nil {
		return err
	}
	next, err := parseSettings(old, edited)
	if err != nil {
		return err
	}
	replacing := cl.ConfigErr != nil
	if changes := old.Changes(next); (len(changes) > 0 || replacing) && !force {
		fmt.Fprintf(c.errOut(), "Changes: %s\n", changeReason(changes, replacing))
		if err := c.confirm("Apply them to the cluster?"); err != nil {
			return err
		}
	}
	return c.applyConfig(ctx, "edit-config", old, next, cl.ConfigVersion, replacing)
}

// editSettings writes cfg to a temporary file, runs the editor on it and
// returns what was saved.
func (c *CLI) editSettings(cfg dcs.Config, note string) ([]byte, error) {
	f, err := os.CreateTemp("", "agentctl-config-*.yaml")
	if err != nil {
		return nil, fmt.Errorf("creating the file to edit: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(formatSettings(cfg, note))
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if err := c.Editor(f.Name()); err != nil {
		return nil, fail(ExitAborted, "the editor failed (%v); nothing was changed", err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return nil, fmt.Errorf("reading the edited config: %w", err)
	}
	return b, nil
}

// formatSettings is the file edit-config opens: one "key: value" line per
// setting with its meaning as a comment. Strings are quoted, so that YAML
// 1.1 readers do not take semi_sync's "off" for a boolean.
func formatSettings(cfg dcs.Config, note string) []byte {
	var b bytes.Buffer
	b.WriteString("# The cluster config. Change values, save and quit to apply; a key left out\n" +
		"# keeps its value. Durations take a unit: 500ms, 5s, 1m30s.\n")
	for _, line := range strings.Split(note, "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	for _, s := range cfg.Settings() {
		v := fmt.Sprint(s.Value)
		if _, isBool := s.Value.(bool); !isBool {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "%s: %s  # %s\n", s.Key, v, s.Help)
	}
	return b.Bytes()
}

// parseSettings reads the "key: value" lines of an edited file (comments
// and blank lines aside) over cfg.
func parseSettings(cfg dcs.Config, text []byte) (dcs.Config, error) {
	var assignments []string
	for n, line := range strings.Split(string(text), "\n") {
		key, value, err := settingLine(line)
		if err != nil {
			return cfg, fail(ExitUsage, "edited config, line %d: %v; nothing was changed", n+1, err)
		}
		if key != "" {
			assignments = append(assignments, key+"="+value)
		}
	}
	return assign(cfg, assignments)
}

// settingLine splits `key: value  # comment`; key is "" for a line without
// a setting. value may be double-quoted.
func settingLine(line string) (key, value string, err error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return "", "", nil
	}
	key, rest, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", fmt.Errorf("%q: want key: value", line)
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", "", fmt.Errorf("%q: unterminated quoted value", line)
		}
		value, _ = strconv.Unquote(q)
	} else {
		value, _, _ = strings.Cut(rest, "#")
		value = strings.TrimSpace(value)
	}
	return strings.TrimSpace(key), value, nil
}

// ShellEditor runs editor (a command line, such as "vim" or "code -w",
// from $VISUAL or $EDITOR) through sh on a file, attached to the terminal.
func ShellEditor(editor string, in io.Reader, out, errOut io.Writer) func(path string) error {
	return func(path string) error {
		cmd := exec.Command("sh", "-c", editor+` "$1"`, "editor", path)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
		return cmd.Run()
	}
}
