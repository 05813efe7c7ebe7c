package dcs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Setting is one setting of a Config as operators read and write it
// (`agentctl show-config`, `set-config`, `edit-config`), under the key its
// stored record uses, which is also the name Validate's messages give it.
type Setting struct {
	Key string
	// Value is a string for a duration ("5s") or a mode ("strict"), a bool
	// for a switch: what JSON and YAML show.
	Value any
	// Help says in a few words what the setting does.
	Help string
}

// setting is one row of the settings table: the one place that names a
// Config field for operators.
type setting struct {
	key, help string
	get       func(Config) any
	set       func(c *Config, value string) error
}

var settings = []setting{
	durationSetting("ttl", "how long the leader lock stays valid without a renewal", func(c *Config) *time.Duration { return &c.TTL }),
	durationSetting("loop_wait", "period of every agent's HA loop", func(c *Config) *time.Duration { return &c.LoopWait }),
	durationSetting("retry_timeout", "bound of one DCS or MySQL call", func(c *Config) *time.Duration { return &c.RetryTimeout }),
	durationSetting("safety_margin", "how long before its lock could expire the leader fences itself", func(c *Config) *time.Duration { return &c.SafetyMargin }),
	durationSetting("maximum_lag_on_failover", "replicas lagging more are not failover candidates", func(c *Config) *time.Duration { return &c.MaximumLagOnFailover }),
	durationSetting("maximum_lag_for_reads", "replicas lagging more (a receiver down: since it last received) leave the read Service; 0 keeps them serving however stale", func(c *Config) *time.Duration { return &c.MaximumLagForReads }),
	{
		key: "semi_sync", help: "off, on (falls back to asynchronous) or strict (never falls back)",
		get: func(c Config) any { return c.SemiSync.String() },
		set: func(c *Config, v string) error {
			m, err := ParseSemiSyncMode(v)
			if err != nil {
				return fmt.Errorf("semi_sync=%s: %w", v, err)
			}
			c.SemiSync = m
			return nil
		},
	},
	{
		key: "rebuild_diverged", help: "auto (save a diverged member's extra transactions to a file on its volume, then rebuild it) or report (a person runs agentctl reinit)",
		get: func(c Config) any { return c.RebuildDiverged.String() },
		set: func(c *Config, v string) error {
			p, err := ParseRebuildPolicy(v)
			if err != nil {
				return fmt.Errorf("rebuild_diverged=%s: %w", v, err)
			}
			c.RebuildDiverged = p
			return nil
		},
	},
	durationSetting("reseed_after", "a replica refused the binary logs it needs (error 1236) this long is rebuilt from a donor; 0 never", func(c *Config) *time.Duration { return &c.ReseedAfter }),
	boolSetting("failsafe_mode", "the leader stays writable while the DCS is unreachable if every member confirms it", func(c *Config) *bool { return &c.Failsafe }),
	boolSetting("paused", "maintenance mode: no automatic failover or demotion", func(c *Config) *bool { return &c.Paused }),
	{
		key: "fenced", help: "members kept read-only and out of every election until unfenced (agentctl fence, unfence), comma-separated",
		get: func(c Config) any { return c.Fenced },
		set: func(c *Config, v string) error {
			f, err := ParseFenced(v)
			if err != nil {
				return err
			}
			c.Fenced = f
			return nil
		},
	},
}

func durationSetting(key, help string, field func(*Config) *time.Duration) setting {
	return setting{
		key: key, help: help,
		get: func(c Config) any { return field(&c).String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%w: %s=%s is not a duration; write it with a unit, like 500ms, 5s or 1m30s", ErrInvalid, key, v)
			}
			*field(c) = d
			return nil
		},
	}
}

func boolSetting(key, help string, field func(*Config) *bool) setting {
	return setting{
		key: key, help: help,
		get: func(c Config) any { return *field(&c) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%w: %s=%s: want true or false", ErrInvalid, key, v)
			}
			*field(c) = b
			return nil
		},
	}
}

// SettingKeys lists the keys of every setting, in the order Settings gives.
func SettingKeys() []string {
	keys := make([]string, len(settings))
	for i, s := range settings {
		keys[i] = s.key
	}
	return keys
}

// Settings lists c's settings in a fixed order.
func (c Config) Settings() []Setting {
	out := make([]Setting, len(settings))
	for i, s := range settings {
		out[i] = Setting{Key: s.key, Value: s.get(c), Help: s.help}
	}
	return out
}

// Set parses value into the setting key. It checks the value on its own;
// whether the settings fit together is Validate's to say. Errors wrap
// ErrInvalid and name the key and the fix.
func (c *Config) Set(key, value string) error {
	for _, s := range settings {
		if s.key == key {
			return s.set(c, strings.TrimSpace(value))
		}
	}
	return fmt.Errorf("%w: unknown config key %q; the keys are %s", ErrInvalid, key, strings.Join(SettingKeys(), ", "))
}

// Changes lists every setting in which next differs from c, as
// "key: old -> new", in the order of Settings.
func (c Config) Changes(next Config) []string {
	var out []string
	for _, s := range settings {
		if old, now := s.get(c), s.get(next); old != now {
			out = append(out, fmt.Sprintf("%s: %v -> %v", s.key, old, now))
		}
	}
	return out
}
