package dcs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SemiSyncMode selects how the primary waits for replicas.
type SemiSyncMode uint8

const (
	// SemiSyncOff: asynchronous replication.
	SemiSyncOff SemiSyncMode = iota
	// SemiSyncOn: the primary waits for one replica's acknowledgement and
	// falls back to asynchronous after the server's timeout.
	SemiSyncOn
	// SemiSyncStrict: the primary never falls back; writes block until a
	// replica acknowledges.
	SemiSyncStrict
)

var semiSyncNames = [...]string{"off", "on", "strict"}

// Valid reports whether m is one of the defined modes.
func (m SemiSyncMode) Valid() bool { return int(m) < len(semiSyncNames) }

func (m SemiSyncMode) String() string {
	if int(m) < len(semiSyncNames) {
		return semiSyncNames[m]
	}
	return fmt.Sprintf("SemiSyncMode(%d)", m)
}

// ParseSemiSyncMode parses the String form of a SemiSyncMode.
func ParseSemiSyncMode(s string) (SemiSyncMode, error) {
	for i, n := range semiSyncNames {
		if n == s {
			return SemiSyncMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown semi-sync mode %q (want one of %v)", ErrInvalid, s, semiSyncNames)
}

// RebuildPolicy says what a member's agent does when the member holds
// transactions the leader lacks (a diverged old primary).
type RebuildPolicy uint8

const (
	// RebuildAuto: save the extra transactions to a file on the member's
	// volume, then rebuild it from a donor. Without a complete save, no
	// rebuild.
	RebuildAuto RebuildPolicy = iota
	// RebuildReport: only report it (status, metric, Event); a person
	// decides (agentctl reinit).
	RebuildReport
)

var rebuildPolicyNames = [...]string{"auto", "report"}

// Valid reports whether p is one of the defined policies.
func (p RebuildPolicy) Valid() bool { return int(p) < len(rebuildPolicyNames) }

func (p RebuildPolicy) String() string {
	if p.Valid() {
		return rebuildPolicyNames[p]
	}
	return fmt.Sprintf("RebuildPolicy(%d)", p)
}

// ParseRebuildPolicy parses the String form of a RebuildPolicy.
func ParseRebuildPolicy(s string) (RebuildPolicy, error) {
	for i, n := range rebuildPolicyNames {
		if n == s {
			return RebuildPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown rebuild_diverged policy %q (want one of %v)", ErrInvalid, s, rebuildPolicyNames)
}

// Bounds of a lock or member ttl. Both backends store ttls in whole seconds
// (Lease leaseDurationSeconds, etcd lease TTL). Anything above MaxTTL is
// treated as an impossible duration in a stored record.
const (
	MinTTL = time.Second
	MaxTTL = 10 * time.Minute
)

// Defaults. They satisfy loop_wait + 2*retry_timeout <= ttl - safety_margin
// (1 + 2*1 = 3 <= 5 - 1 = 4) and bound an unplanned failover by about
// ttl + loop_wait after the primary's agent dies.
const (
	DefaultTTL          = 5 * time.Second
	DefaultLoopWait     = 1 * time.Second
	DefaultRetryTimeout = 1 * time.Second
	DefaultSafetyMargin = 1 * time.Second
	// DefaultMaximumLagOnFailover excludes replicas further behind than this.
	DefaultMaximumLagOnFailover = 30 * time.Second
	// DefaultMaximumLagForReads takes replicas further behind than this
	// out of the read Service. As long as the failover bound: a replica
	// too stale to take over is too stale to read from.
	DefaultMaximumLagForReads = 30 * time.Second
	// DefaultReseedAfter: how long a replica may be refused the binary logs
	// it needs before it is rebuilt. Long enough for a person who purged
	// by mistake to notice; short against a night on two of three members.
	DefaultReseedAfter = 5 * time.Minute
)

// Member record timing, shared by all backends: UpdateMember writes at least
// every DefaultMemberRefresh, and observers judge a record stale when it has
// not changed for DefaultMemberTTL (Kubernetes, memory) or its session lease
// lapses (etcd).
const (
	DefaultMemberTTL     = 30 * time.Second
	DefaultMemberRefresh = 10 * time.Second
)

// Config is the cluster-wide configuration stored in the DCS.
type Config struct {
	// TTL is how long the leader lock stays valid without renewal.
	TTL time.Duration
	// LoopWait is the HA loop's period.
	LoopWait time.Duration
	// RetryTimeout bounds one DCS or MySQL call.
	RetryTimeout time.Duration
	// SafetyMargin is how long before its lock could expire the holder
	// fences itself.
	SafetyMargin time.Duration
	// MaximumLagOnFailover: replicas lagging more are not candidates.
	MaximumLagOnFailover time.Duration
	// MaximumLagForReads: replicas lagging more serve no reads (their pods
	// are not Ready, so the read Service leaves them out); a receiver that
	// does not receive counts the time since it last did. 0 keeps every
	// replica serving however stale.
	MaximumLagForReads time.Duration
	// SemiSync is the replication mode the primary enforces.
	SemiSync SemiSyncMode
	// Paused is maintenance mode: no automatic failover or demotion.
	Paused bool
	// Failsafe keeps the leader writable while the DCS is unreachable, as
	// long as every member confirms it.
	Failsafe bool
	// RebuildDiverged: what happens to a member holding transactions the
	// leader lacks.
	RebuildDiverged RebuildPolicy
	// ReseedAfter: how long a replica's source may refuse it the binary
	// logs it needs (error 1236) before it is rebuilt from a donor; 0
	// never rebuilds it automatically.
	ReseedAfter time.Duration
	// Fenced lists the members an operator fenced (agentctl fence), in
	// the canonical form ParseFenced returns: sorted, comma-separated. A
	// fenced member stays read-only and never leads until unfenced. A
	// string, so that Config stays comparable.
	Fenced string
}

// ParseFenced checks a list of member names (comma-separated) and returns
// it in canonical form: sorted, without repeats or blanks.
func ParseFenced(v string) (string, error) {
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if strings.ContainsAny(n, " \t=") {
			return "", fmt.Errorf("%w: fenced=%s: %q is not a member name; list members separated by commas", ErrInvalid, v, n)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ","), nil
}

// IsFenced reports whether an operator fenced member (agentctl fence).
func (c Config) IsFenced(member string) bool {
	return member != "" && slices.Contains(strings.Split(c.Fenced, ","), member)
}

// WithFenced returns c with member fenced (on) or unfenced.
func (c Config) WithFenced(member string, on bool) Config {
	names := slices.DeleteFunc(strings.Split(c.Fenced, ","), func(n string) bool { return n == "" || n == member })
	if on {
		names = append(names, member)
	}
	c.Fenced, _ = ParseFenced(strings.Join(names, ","))
	return c
}

// DefaultConfig returns the configuration in effect when none is stored.
func DefaultConfig() Config {
	return Config{
		TTL:                  DefaultTTL,
		LoopWait:             DefaultLoopWait,
		RetryTimeout:         DefaultRetryTimeout,
		SafetyMargin:         DefaultSafetyMargin,
		MaximumLagOnFailover: DefaultMaximumLagOnFailover,
		MaximumLagForReads:   DefaultMaximumLagForReads,
		SemiSync:             SemiSyncOff,
		ReseedAfter:          DefaultReseedAfter,
	}
}

// Validate checks the timing rule of the fence deadline:
//
//	loop_wait + 2*retry_timeout <= ttl - safety_margin
//
// A holder renews at least every loop_wait, and one renew may take up to
// retry_timeout and be retried once; it must still be able to fence before
// any other member can legally take the lock. The error wraps ErrInvalid and
// states the rule with the values.
func (c Config) Validate() error {
	var errs []error
	if err := ValidateTTL(c.TTL); err != nil {
		errs = append(errs, fmt.Errorf("ttl: %w", err))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"loop_wait", c.LoopWait}, {"retry_timeout", c.RetryTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s must be > 0, got %v", ErrInvalid, d.name, d.v))
		}
	}
	if c.SafetyMargin < 0 {
		errs = append(errs, fmt.Errorf("%w: safety_margin must be >= 0, got %v", ErrInvalid, c.SafetyMargin))
	}
	if c.MaximumLagOnFailover < 0 {
		errs = append(errs, fmt.Errorf("%w: maximum_lag_on_failover must be >= 0, got %v", ErrInvalid, c.MaximumLagOnFailover))
	}
	if c.MaximumLagForReads < 0 {
		errs = append(errs, fmt.Errorf("%w: maximum_lag_for_reads must be >= 0 (0 keeps every replica serving reads), got %v", ErrInvalid, c.MaximumLagForReads))
	}
	if c.ReseedAfter < 0 {
		errs = append(errs, fmt.Errorf("%w: reseed_after must be >= 0 (0 never rebuilds automatically), got %v", ErrInvalid, c.ReseedAfter))
	}
	if canon, err := ParseFenced(c.Fenced); err != nil {
		errs = append(errs, err)
	} else if canon != c.Fenced {
		errs = append(errs, fmt.Errorf("%w: fenced %q is not in canonical form %q", ErrInvalid, c.Fenced, canon))
	}
	if !c.RebuildDiverged.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown rebuild_diverged policy %d", ErrInvalid, c.RebuildDiverged))
	}
	if !c.SemiSync.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown semi-sync mode %d", ErrInvalid, c.SemiSync))
	}
	if lhs, rhs := c.LoopWait+2*c.RetryTimeout, c.TTL-c.SafetyMargin; lhs > rhs {
		errs = append(errs, fmt.Errorf("%w: loop_wait + 2*retry_timeout <= ttl - safety_margin must hold, "+
			"got %v + 2*%v = %v > %v - %v = %v; raise ttl or lower loop_wait/retry_timeout",
			ErrInvalid, c.LoopWait, c.RetryTimeout, lhs, c.TTL, c.SafetyMargin, rhs))
	}
	return errors.Join(errs...)
}

// ValidateTTL checks that d is a whole number of seconds in [MinTTL, MaxTTL].
func ValidateTTL(d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return fmt.Errorf("%w: ttl must be between %v and %v, got %v", ErrInvalid, MinTTL, MaxTTL, d)
	}
	if d%time.Second != 0 {
		return fmt.Errorf("%w: ttl must be a whole number of seconds (Lease and etcd lease TTLs are in seconds), got %v", ErrInvalid, d)
	}
	return nil
}

// quoteMax bounds how much of a value an error message quotes.
const quoteMax = 64

// QuoteCut quotes s for an error message or a log field, cut to its first
// 64 bytes (on a rune boundary) followed by its length when longer: a
// value read from a record anyone may write (a Lease's holderIdentity) can
// be kilobytes, and an error about it is logged every loop.
func QuoteCut(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	cut := s[:quoteMax]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(cut), len(s))
}

// nameRE is an RFC 1123 label: it fits Kubernetes object names and etcd key
// segments alike, and cannot collide with UnknownHolder.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// MaxNameLen bounds cluster and member names so that derived object names
// ("<cluster>-member-<member>") stay valid Kubernetes names.
const MaxNameLen = 63

// ValidateName checks a cluster or member name: lower-case letters, digits
// and '-', starting and ending with a letter or digit, at most MaxNameLen.
func ValidateName(kind, name string) error {
	if len(name) > MaxNameLen || !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %s name %s must be lower-case letters, digits and '-', start and end with a letter or digit, at most %d characters",
			ErrInvalid, kind, QuoteCut(name), MaxNameLen)
	}
	return nil
}

// MaxInstanceLen bounds an agent instance id.
const MaxInstanceLen = 63

// instanceRE: no '/' or ':', so an id can be joined to a member name
// unambiguously (the Kubernetes backend does), and no upper case, so that
// one id has one spelling.
var instanceRE = regexp.MustCompile(`^[a-z0-9-]+$`)

// ValidateInstance checks an agent instance id: 1 to MaxInstanceLen
// lower-case letters, digits and '-'.
func ValidateInstance(instance string) error {
	if len(instance) > MaxInstanceLen || !instanceRE.MatchString(instance) {
		return fmt.Errorf("%w: agent instance id %s must be 1 to %d lower-case letters, digits and '-', "+
			"such as the 16 hex characters NewInstance draws", ErrInvalid, QuoteCut(instance), MaxInstanceLen)
	}
	return nil
}

// NewInstance draws a random agent instance id: 16 lower-case hex
// characters from crypto/rand, so two agent processes never share one.
func NewInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// ValidateHandover checks the target of a hand-over by the store of member
// self: a valid member name other than self, and the valid instance id of
// the target agent (from its member record), without which the lock would
// be handed to whichever agent happens to carry the name.
func ValidateHandover(self, to, toInstance string) error {
	if err := ValidateName("member", to); err != nil {
		return err
	}
	if to == self {
		return fmt.Errorf("%w: cannot hand the lock over to oneself", ErrInvalid)
	}
	if toInstance == "" {
		return fmt.Errorf("%w: hand-over to %s needs the target's agent instance id (Member.Instance of its record); "+
			"a record without one was written by an agent too old to take a hand-over", ErrInvalid, to)
	}
	if err := ValidateInstance(toInstance); err != nil {
		return fmt.Errorf("hand-over target %s: %w", to, err)
	}
	return nil
}
