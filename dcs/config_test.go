package dcs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := dcs.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		mod  func(*dcs.Config)
		want []string // substrings of the error; none = valid
	}{
		{"defaults", func(*dcs.Config) {}, nil},
		{"rule holds with equality", func(c *dcs.Config) { c.TTL, c.LoopWait, c.RetryTimeout, c.SafetyMargin = 10*s, 2*s, 3*s, 2*s }, nil},
		{"rule broken", func(c *dcs.Config) { c.LoopWait = 3 * s },
			[]string{"loop_wait + 2*retry_timeout <= ttl - safety_margin must hold, got 3s + 2*1s = 5s > 5s - 1s = 4s"}},
		{"rule broken by margin", func(c *dcs.Config) { c.SafetyMargin = 3 * s }, []string{"= 3s > 5s - 3s = 2s"}},
		{"fractional ttl", func(c *dcs.Config) { c.TTL = 5500 * time.Millisecond }, []string{"whole number of seconds"}},
		{"ttl too small", func(c *dcs.Config) { c.TTL = 0 }, []string{"ttl must be between 1s and 10m0s, got 0s"}},
		{"ttl too large", func(c *dcs.Config) { c.TTL = time.Hour }, []string{"ttl must be between"}},
		{"zero loop_wait", func(c *dcs.Config) { c.LoopWait = 0 }, []string{"loop_wait must be > 0"}},
		{"negative retry_timeout", func(c *dcs.Config) { c.RetryTimeout = -s }, []string{"retry_timeout must be > 0"}},
		{"negative margin", func(c *dcs.Config) { c.SafetyMargin = -s }, []string{"safety_margin must be >= 0"}},
		{"negative lag", func(c *dcs.Config) { c.MaximumLagOnFailover = -s }, []string{"maximum_lag_on_failover must be >= 0"}},
		{"negative maximum_lag_for_reads", func(c *dcs.Config) { c.MaximumLagForReads = -s }, []string{"maximum_lag_for_reads must be >= 0 (0 keeps every replica serving reads)"}},
		{"negative reseed_after", func(c *dcs.Config) { c.ReseedAfter = -s }, []string{"reseed_after must be >= 0 (0 never rebuilds automatically)"}},
		{"unknown rebuild policy", func(c *dcs.Config) { c.RebuildDiverged = 9 }, []string{"unknown rebuild_diverged policy 9"}},
		{"bad semi-sync", func(c *dcs.Config) { c.SemiSync = 9 }, []string{"unknown semi-sync mode 9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dcs.DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, dcs.ErrInvalid) {
				t.Fatalf("Validate() = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{
		"m0": true, "mysql-0": true, "a": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false, "a/b": false,
		strings.Repeat("a", 64): false, dcs.UnknownHolder: false,
	} {
		err := dcs.ValidateName("member", name)
		if (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err != nil && !errors.Is(err, dcs.ErrInvalid) {
			t.Errorf("ValidateName(%q) error does not wrap ErrInvalid: %v", name, err)
		}
	}
}

func TestValidateInstance(t *testing.T) {
	for inst, ok := range map[string]bool{
		"3fa2c09e1b7d4a55": true, "a": true, "-": true, "pod-7f9c-x": true, strings.Repeat("a", dcs.MaxInstanceLen): true,
		"": false, "A": false, "a/b": false, "a:b": false, "a b": false, "a_b": false, "é": false,
		strings.Repeat("a", dcs.MaxInstanceLen+1): false,
	} {
		err := dcs.ValidateInstance(inst)
		if (err == nil) != ok {
			t.Errorf("ValidateInstance(%q) = %v, want ok=%v", inst, err, ok)
		}
		if err != nil && (!errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), "lower-case letters, digits and '-'")) {
			t.Errorf("ValidateInstance(%q) error does not wrap ErrInvalid and state the rule: %v", inst, err)
		}
	}
}

func TestNewInstance(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := dcs.NewInstance()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("NewInstance() = %q, want 16 lower-case hex characters", id)
		}
		if seen[id] {
			t.Fatalf("NewInstance() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestValidateHandover(t *testing.T) {
	const inst = "3fa2c09e1b7d4a55"
	for _, tc := range []struct {
		to, toInstance string
		want           string // "" = valid
	}{
		{"m1", inst, ""},
		{"m0", inst, "cannot hand the lock over to oneself"},
		{"Bad Name", inst, "member name"},
		{"m1", "", "needs the target's agent instance id"},
		{"m1", "Not/An-Id", `hand-over target m1: dcs: invalid argument: agent instance id "Not/An-Id"`},
		{"m1", strings.Repeat("a", dcs.MaxInstanceLen+1), "agent instance id"},
	} {
		err := dcs.ValidateHandover("m0", tc.to, tc.toInstance)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ValidateHandover(m0, %q, %q) = %v, want nil", tc.to, tc.toInstance, err)
			}
			continue
		}
		if !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateHandover(m0, %q, %q) = %v, want ErrInvalid containing %q", tc.to, tc.toInstance, err, tc.want)
		}
	}
}

func TestEnumsRoundTrip(t *testing.T) {
	for r := dcs.RoleUnknown; r.Valid(); r++ {
		if got, err := dcs.ParseRole(r.String()); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r, got, err)
		}
	}
	for s := dcs.ReplicationUnknown; s.Valid(); s++ {
		if got, err := dcs.ParseReplicationState(s.String()); err != nil || got != s {
			t.Errorf("ParseReplicationState(%q) = %v, %v", s, got, err)
		}
	}
	for m := dcs.SemiSyncOff; m.Valid(); m++ {
		if got, err := dcs.ParseSemiSyncMode(m.String()); err != nil || got != m {
			t.Errorf("ParseSemiSyncMode(%q) = %v, %v", m, got, err)
		}
	}
	for _, k := range []dcs.HistoryKind{dcs.HistoryFailover, dcs.HistorySwitchover} {
		if got, err := dcs.ParseHistoryKind(k.String()); err != nil || got != k {
			t.Errorf("ParseHistoryKind(%q) = %v, %v", k, got, err)
		}
	}
	if _, err := dcs.ParseRole("emperor"); !errors.Is(err, dcs.ErrInvalid) {
		t.Errorf("ParseRole(emperor) = %v", err)
	}
	if dcs.Role(9).String() != "Role(9)" || dcs.Role(9).Valid() || dcs.HistoryKind(0).Valid() {
		t.Error("out-of-range enums must be invalid and print their number")
	}
}

// An invalid name comes from a record anyone may write (a Lease's
// holderIdentity): its error, logged every loop, quotes only its start.
func TestValidateNameCutsAHugeName(t *testing.T) {
	huge := strings.Repeat("x", 10<<10)
	for _, err := range []error{dcs.ValidateName("holder", huge), dcs.ValidateInstance(huge)} {
		if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), `"`+strings.Repeat("x", 64)+`"...`) ||
			!strings.Contains(err.Error(), "(10240 bytes)") {
			t.Errorf("error quotes more than the first 64 bytes, or not its length (%d bytes): %.300s", len(err.Error()), err)
		}
	}
	if err := dcs.ValidateName("member", "Db1"); err == nil || !strings.Contains(err.Error(), `"Db1"`) {
		t.Errorf("a short invalid name is quoted whole: %v", err)
	}
}
