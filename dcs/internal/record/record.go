// Package record holds what the DCS backends share, so that each
// backend-neutral rule is written once:
//
//   - the wire format: JSON encodings of member records and cluster state,
//     with the validation that turns garbage into dcs.ErrCorrupt errors
//     naming the object, and DecodeState, which reads the cluster-state
//     records into a dcs.Cluster;
//   - the expiry rule (Expired);
//   - the defaults of the options every store takes (StoreOptions);
//   - the member write-rate policy (MemberNeedsWrite);
//   - the preparation and refusal of the create-once records
//     (PrepareSwitchover, PrepareInitialized).
//
// Durations are stored as Go duration strings ("1.5s") and times as RFC
// 3339, so records stay readable in kubectl and etcdctl and round-trip
// exactly.
//
// Decoders ignore unknown JSON fields so that an older agent can read
// records written by a newer one during a rolling upgrade.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

type memberJSON struct {
	Name             string            `json:"name"`
	Instance         string            `json:"instance,omitempty"`
	Role             string            `json:"role"`
	APIURL           string            `json:"api_url,omitempty"`
	MySQLAddr        string            `json:"mysql_addr,omitempty"`
	GTIDExecuted     string            `json:"gtid_executed,omitempty"`
	GTIDRetrieved    string            `json:"gtid_retrieved,omitempty"`
	Replication      string            `json:"replication"`
	ReplicationError string            `json:"replication_error,omitempty"`
	Lag              *string           `json:"lag,omitempty"`
	Receiver         string            `json:"receiver,omitempty"`
	NoFailover       bool              `json:"nofailover,omitempty"`
	FailoverPriority int               `json:"failover_priority,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
	AgentVersion     string            `json:"agent_version,omitempty"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// ValidateMember checks what a writer may publish; errors wrap dcs.ErrInvalid.
func ValidateMember(m dcs.Member) error {
	var errs []error
	if err := dcs.ValidateName("member", m.Name); err != nil {
		errs = append(errs, err)
	}
	// "" is a record of an agent older than instance ids; PrepareMember
	// never writes one.
	if m.Instance != "" {
		if err := dcs.ValidateInstance(m.Instance); err != nil {
			errs = append(errs, err)
		}
	}
	if !m.Role.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown role %d", dcs.ErrInvalid, m.Role))
	}
	if !m.Replication.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown replication state %d", dcs.ErrInvalid, m.Replication))
	}
	if !m.Receiver.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown receiver state %d", dcs.ErrInvalid, m.Receiver))
	}
	if m.APIURL != "" {
		if u, err := url.Parse(m.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%w: api url %s must be http(s)://host[:port]", dcs.ErrInvalid, dcs.QuoteCut(m.APIURL)))
		}
	}
	if m.MySQLAddr != "" {
		_, port, err := net.SplitHostPort(m.MySQLAddr)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%w: mysql address %s must be host:port", dcs.ErrInvalid, dcs.QuoteCut(m.MySQLAddr)))
		}
	}
	if m.Lag != nil && *m.Lag < 0 {
		errs = append(errs, fmt.Errorf("%w: lag must be >= 0, got %v", dcs.ErrInvalid, *m.Lag))
	}
	if m.FailoverPriority < 0 {
		errs = append(errs, fmt.Errorf("%w: failover priority must be >= 0, got %d", dcs.ErrInvalid, m.FailoverPriority))
	}
	return errors.Join(errs...)
}

// EncodeMember validates and encodes a member record.
func EncodeMember(m dcs.Member) ([]byte, error) {
	if err := ValidateMember(m); err != nil {
		return nil, err
	}
	j := memberJSON{
		Name: m.Name, Instance: m.Instance, Role: m.Role.String(), APIURL: m.APIURL, MySQLAddr: m.MySQLAddr,
		GTIDExecuted: m.GTIDExecuted, GTIDRetrieved: m.GTIDRetrieved,
		Replication: m.Replication.String(), ReplicationError: m.ReplicationError, Receiver: m.Receiver.String(),
		NoFailover: m.NoFailover, FailoverPriority: m.FailoverPriority,
		Tags: m.Tags, AgentVersion: m.AgentVersion, UpdatedAt: m.UpdatedAt.UTC(),
	}
	if m.Lag != nil {
		s := m.Lag.String()
		j.Lag = &s
	}
	return json.Marshal(j)
}

// DecodeMember decodes the record stored at where (an object or key name,
// used in the error) and checks it names wantName. Errors wrap
// dcs.ErrCorrupt. A record without an instance id (written by an older
// agent) decodes with Instance "".
func DecodeMember(where, wantName string, b []byte) (dcs.Member, error) {
	var j memberJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Member{}, corrupt(where, "member record is not valid JSON", err)
	}
	m := dcs.Member{
		Name: j.Name, Instance: j.Instance, APIURL: j.APIURL, MySQLAddr: j.MySQLAddr,
		GTIDExecuted: j.GTIDExecuted, GTIDRetrieved: j.GTIDRetrieved,
		ReplicationError: j.ReplicationError, Receiver: dcs.ParseReceiverState(j.Receiver), NoFailover: j.NoFailover,
		FailoverPriority: j.FailoverPriority, Tags: j.Tags, AgentVersion: j.AgentVersion, UpdatedAt: j.UpdatedAt,
	}
	var errs []error
	var err error
	if m.Role, err = dcs.ParseRole(j.Role); err != nil {
		errs = append(errs, err)
	}
	if m.Replication, err = dcs.ParseReplicationState(j.Replication); err != nil {
		errs = append(errs, err)
	}
	if j.Lag != nil {
		d, err := time.ParseDuration(*j.Lag)
		if err != nil {
			errs = append(errs, fmt.Errorf("lag: %w", err))
		}
		m.Lag = &d
	}
	if j.Name != wantName {
		errs = append(errs, fmt.Errorf("record names member %s, want %q", dcs.QuoteCut(j.Name), wantName))
	}
	if m.UpdatedAt.IsZero() {
		errs = append(errs, errors.New("updated_at is missing"))
	}
	if len(errs) == 0 {
		if err := ValidateMember(m); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return dcs.Member{}, corrupt(where, "invalid member record", errors.Join(errs...))
	}
	return m, nil
}

// volatile strips the fields UpdateMember may publish lazily, and the
// read-side fields, for comparing two records.
func volatile(m dcs.Member) dcs.Member {
	m.GTIDExecuted, m.GTIDRetrieved, m.Lag = "", "", nil
	m.UpdatedAt, m.Version, m.ObservedAt, m.Stale = time.Time{}, "", time.Time{}, false
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	return m
}

// PrepareMember readies m for writing by the store of member self and agent
// instance selfInstance: an empty name means self and an empty instance
// selfInstance; another member's name, or another instance id, is refused;
// UpdatedAt defaults to now, and the read-side fields are cleared. It
// returns the record and its encoding.
//
// It does not look at the stored record: whether to overwrite a record
// another instance of this member wrote is the agent's decision.
func PrepareMember(self, selfInstance string, m dcs.Member, now time.Time) (dcs.Member, []byte, error) {
	if m.Name == "" {
		m.Name = self
	}
	if m.Name != self {
		return dcs.Member{}, nil, fmt.Errorf("%w: store of member %s cannot write the record of %s", dcs.ErrInvalid, self, m.Name)
	}
	if m.Instance == "" {
		m.Instance = selfInstance
	}
	if m.Instance != selfInstance {
		return dcs.Member{}, nil, fmt.Errorf("%w: store of agent instance %s cannot write a record of instance %q; leave Member.Instance empty",
			dcs.ErrInvalid, selfInstance, m.Instance)
	}
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = now
	}
	m.Version, m.ObservedAt, m.Stale = "", time.Time{}, false
	data, err := EncodeMember(m)
	if err != nil {
		return dcs.Member{}, nil, err
	}
	return m, data, nil
}

// HolderDescription names the lock holder (holder, instance) in the errors
// of the store of (self, selfInstance). A holder carrying this store's
// member name is another agent process: the description says so, because
// it means two agents were started with one name.
func HolderDescription(self, selfInstance, holder, instance string) string {
	switch {
	case holder != self || instance == selfInstance:
		return holder
	case instance == "":
		return holder + " (with no agent instance id: written by an older agent or by hand, so not this agent's)"
	default:
		return fmt.Sprintf("%s (another agent instance %s; two agents may be running with one name)", holder, instance)
	}
}

// MemberNeedsWrite implements the write-rate policy of UpdateMember: write
// when nothing was written yet (last == nil), when a non-volatile field
// changed, or when the last write is refresh old.
func MemberNeedsWrite(last *dcs.Member, lastAt time.Time, next dcs.Member, now time.Time, refresh time.Duration) bool {
	if last == nil || now.Sub(lastAt) >= refresh {
		return true
	}
	return !reflect.DeepEqual(volatile(*last), volatile(next))
}

type configJSON struct {
	TTL                  string `json:"ttl,omitempty"`
	LoopWait             string `json:"loop_wait,omitempty"`
	RetryTimeout         string `json:"retry_timeout,omitempty"`
	SafetyMargin         string `json:"safety_margin,omitempty"`
	MaximumLagOnFailover string `json:"maximum_lag_on_failover,omitempty"`
	MaximumLagForReads   string `json:"maximum_lag_for_reads,omitempty"`
	SemiSync             string `json:"semi_sync,omitempty"`
	Paused               bool   `json:"paused,omitempty"`
	Failsafe             bool   `json:"failsafe_mode,omitempty"`
	RebuildDiverged      string `json:"rebuild_diverged,omitempty"`
	ReseedAfter          string `json:"reseed_after,omitempty"`
	Fenced               string `json:"fenced,omitempty"`
}

// EncodeConfig validates and encodes a config.
func EncodeConfig(c dcs.Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(configJSON{
		TTL: c.TTL.String(), LoopWait: c.LoopWait.String(), RetryTimeout: c.RetryTimeout.String(),
		SafetyMargin: c.SafetyMargin.String(), MaximumLagOnFailover: c.MaximumLagOnFailover.String(),
		MaximumLagForReads: c.MaximumLagForReads.String(),
		SemiSync:           c.SemiSync.String(), Paused: c.Paused, Failsafe: c.Failsafe,
		RebuildDiverged: c.RebuildDiverged.String(), ReseedAfter: c.ReseedAfter.String(), Fenced: c.Fenced,
	})
}

// DecodeConfig decodes a stored config; absent fields take their defaults
// (so an operator may store a partial config). The result must Validate.
func DecodeConfig(where string, b []byte) (dcs.Config, error) {
	var j configJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Config{}, corrupt(where, "config is not valid JSON", err)
	}
	c := dcs.DefaultConfig()
	var errs []error
	for _, f := range []struct {
		name string
		s    string
		d    *time.Duration
	}{
		{"ttl", j.TTL, &c.TTL}, {"loop_wait", j.LoopWait, &c.LoopWait},
		{"retry_timeout", j.RetryTimeout, &c.RetryTimeout}, {"safety_margin", j.SafetyMargin, &c.SafetyMargin},
		{"maximum_lag_on_failover", j.MaximumLagOnFailover, &c.MaximumLagOnFailover},
		{"maximum_lag_for_reads", j.MaximumLagForReads, &c.MaximumLagForReads},
		{"reseed_after", j.ReseedAfter, &c.ReseedAfter},
	} {
		if f.s == "" {
			continue
		}
		d, err := time.ParseDuration(f.s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		*f.d = d
	}
	if j.SemiSync != "" {
		m, err := dcs.ParseSemiSyncMode(j.SemiSync)
		if err != nil {
			errs = append(errs, err)
		}
		c.SemiSync = m
	}
	if j.RebuildDiverged != "" {
		p, err := dcs.ParseRebuildPolicy(j.RebuildDiverged)
		if err != nil {
			errs = append(errs, err)
		}
		c.RebuildDiverged = p
	}
	c.Paused, c.Failsafe = j.Paused, j.Failsafe
	if f, err := dcs.ParseFenced(j.Fenced); err != nil {
		errs = append(errs, err)
	} else {
		c.Fenced = f
	}
	if len(errs) == 0 {
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return dcs.Config{}, corrupt(where, "invalid config", errors.Join(errs...))
	}
	return c, nil
}

type switchoverJSON struct {
	From        string    `json:"from,omitempty"`
	To          string    `json:"to,omitempty"`
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
	RequestedAt time.Time `json:"requested_at"`
	Force       bool      `json:"force,omitempty"`
}

// ValidateSwitchover checks a request; errors wrap dcs.ErrInvalid.
func ValidateSwitchover(sw dcs.Switchover) error {
	var errs []error
	for _, n := range []struct{ what, name string }{{"switchover from", sw.From}, {"switchover to", sw.To}} {
		if n.name != "" {
			errs = append(errs, dcs.ValidateName(n.what, n.name))
		}
	}
	if sw.From != "" && sw.From == sw.To {
		errs = append(errs, fmt.Errorf("%w: switchover from and to are both %q", dcs.ErrInvalid, sw.From))
	}
	if sw.RequestedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: switchover requested_at is missing", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// EncodeSwitchover validates and encodes a switchover request.
func EncodeSwitchover(sw dcs.Switchover) ([]byte, error) {
	if err := ValidateSwitchover(sw); err != nil {
		return nil, err
	}
	return json.Marshal(switchoverJSON{From: sw.From, To: sw.To, ScheduledAt: sw.ScheduledAt.UTC(), RequestedAt: sw.RequestedAt.UTC(), Force: sw.Force})
}

// DecodeSwitchover decodes a stored switchover request.
func DecodeSwitchover(where string, b []byte) (dcs.Switchover, error) {
	var j switchoverJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Switchover{}, corrupt(where, "switchover request is not valid JSON", err)
	}
	sw := dcs.Switchover{From: j.From, To: j.To, ScheduledAt: j.ScheduledAt, RequestedAt: j.RequestedAt, Force: j.Force}
	if err := ValidateSwitchover(sw); err != nil {
		return dcs.Switchover{}, corrupt(where, "invalid switchover request", err)
	}
	return sw, nil
}

type reinitJSON struct {
	Member      string    `json:"member"`
	Donor       string    `json:"donor,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	Reason      string    `json:"reason,omitempty"`
}

// ValidateReinit checks a request; errors wrap dcs.ErrInvalid.
func ValidateReinit(r dcs.Reinit) error {
	errs := []error{dcs.ValidateName("reinit member", r.Member)}
	if r.Donor != "" {
		errs = append(errs, dcs.ValidateName("reinit donor", r.Donor))
	}
	if r.Donor != "" && r.Donor == r.Member {
		errs = append(errs, fmt.Errorf("%w: reinit member and donor are both %q", dcs.ErrInvalid, r.Member))
	}
	if r.RequestedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: reinit requested_at is missing", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// EncodeReinit validates and encodes a reinit request.
func EncodeReinit(r dcs.Reinit) ([]byte, error) {
	if err := ValidateReinit(r); err != nil {
		return nil, err
	}
	return json.Marshal(reinitJSON{Member: r.Member, Donor: r.Donor, RequestedAt: r.RequestedAt.UTC(), Reason: r.Reason})
}

// DecodeReinit decodes a stored reinit request.
func DecodeReinit(where string, b []byte) (dcs.Reinit, error) {
	var j reinitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Reinit{}, corrupt(where, "reinit request is not valid JSON", err)
	}
	r := dcs.Reinit{Member: j.Member, Donor: j.Donor, RequestedAt: j.RequestedAt, Reason: j.Reason}
	if err := ValidateReinit(r); err != nil {
		return dcs.Reinit{}, corrupt(where, "invalid reinit request", err)
	}
	return r, nil
}

type restartJSON struct {
	Member      string    `json:"member"`
	RequestedAt time.Time `json:"requested_at"`
}

// ValidateRestart checks a request; errors wrap dcs.ErrInvalid.
func ValidateRestart(r dcs.Restart) error {
	errs := []error{dcs.ValidateName("restart member", r.Member)}
	if r.RequestedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: restart requested_at is missing", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// EncodeRestart validates and encodes a restart request.
func EncodeRestart(r dcs.Restart) ([]byte, error) {
	if err := ValidateRestart(r); err != nil {
		return nil, err
	}
	return json.Marshal(restartJSON{Member: r.Member, RequestedAt: r.RequestedAt.UTC()})
}

// DecodeRestart decodes a stored restart request.
func DecodeRestart(where string, b []byte) (dcs.Restart, error) {
	var j restartJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Restart{}, corrupt(where, "restart request is not valid JSON", err)
	}
	r := dcs.Restart{Member: j.Member, RequestedAt: j.RequestedAt}
	if err := ValidateRestart(r); err != nil {
		return dcs.Restart{}, corrupt(where, "invalid restart request", err)
	}
	return r, nil
}

type initializedJSON struct {
	ClusterID    string    `json:"cluster_id"`
	FirstGTID    string    `json:"first_gtid,omitempty"`
	Bootstrapper string    `json:"bootstrapper,omitempty"`
	At           time.Time `json:"at"`
}

// ValidateInitialized checks an initialized record; errors wrap dcs.ErrInvalid.
func ValidateInitialized(in dcs.Initialized) error {
	var errs []error
	if in.ClusterID == "" {
		errs = append(errs, fmt.Errorf("%w: initialized cluster_id is empty", dcs.ErrInvalid))
	}
	if in.Bootstrapper != "" {
		errs = append(errs, dcs.ValidateName("bootstrapper", in.Bootstrapper))
	}
	if in.At.IsZero() {
		errs = append(errs, fmt.Errorf("%w: initialized at is missing", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// EncodeInitialized validates and encodes an initialized record.
func EncodeInitialized(in dcs.Initialized) ([]byte, error) {
	if err := ValidateInitialized(in); err != nil {
		return nil, err
	}
	return json.Marshal(initializedJSON{ClusterID: in.ClusterID, FirstGTID: in.FirstGTID, Bootstrapper: in.Bootstrapper, At: in.At.UTC()})
}

// DecodeInitialized decodes a stored initialized record.
func DecodeInitialized(where string, b []byte) (dcs.Initialized, error) {
	var j initializedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return dcs.Initialized{}, corrupt(where, "initialized record is not valid JSON", err)
	}
	in := dcs.Initialized{ClusterID: j.ClusterID, FirstGTID: j.FirstGTID, Bootstrapper: j.Bootstrapper, At: j.At}
	if err := ValidateInitialized(in); err != nil {
		return dcs.Initialized{}, corrupt(where, "invalid initialized record", err)
	}
	return in, nil
}

type historyJSON struct {
	Kind             string    `json:"kind"`
	From             string    `json:"from,omitempty"`
	To               string    `json:"to"`
	At               time.Time `json:"at"`
	Reason           string    `json:"reason,omitempty"`
	WriteUnavailable string    `json:"write_unavailable,omitempty"`
}

// ValidateHistoryEntry checks an entry; errors wrap dcs.ErrInvalid.
func ValidateHistoryEntry(e dcs.HistoryEntry) error {
	var errs []error
	switch {
	case e.Kind == dcs.HistoryOther:
		// A newer version's entry: kept as it is, whatever it names.
		if !isKindName(e.KindName) {
			errs = append(errs, fmt.Errorf("%w: history kind %s is not a kind name", dcs.ErrInvalid, dcs.QuoteCut(e.KindName)))
		}
	case !e.Kind.Valid():
		errs = append(errs, fmt.Errorf("%w: unknown history kind %d", dcs.ErrInvalid, e.Kind))
	case e.Kind == dcs.HistoryConfig:
		errs = append(errs, validateConfigEntry(e))
	default:
		if e.From != "" {
			errs = append(errs, dcs.ValidateName("history from", e.From))
		}
		errs = append(errs, dcs.ValidateName("history to", e.To))
	}
	if e.At.IsZero() {
		errs = append(errs, fmt.Errorf("%w: history entry time is missing", dcs.ErrInvalid))
	}
	if e.WriteUnavailable < 0 {
		errs = append(errs, fmt.Errorf("%w: write_unavailable must be >= 0", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// isKindName reports whether s can be a history kind's name: what a newer
// version may write, not arbitrary text.
func isKindName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
			return false
		}
	}
	return true
}

// validateConfigEntry checks what a config change's entry holds: no
// members, and the changes in its reason.
func validateConfigEntry(e dcs.HistoryEntry) error {
	var errs []error
	if e.From != "" || e.To != "" {
		errs = append(errs, fmt.Errorf("%w: a config history entry names no members, got from %q to %q", dcs.ErrInvalid, e.From, e.To))
	}
	if e.Reason == "" {
		errs = append(errs, fmt.Errorf("%w: a config history entry lists the changes in its reason, got none", dcs.ErrInvalid))
	}
	return errors.Join(errs...)
}

// AppendHistory returns a copy of h with e appended, keeping the newest
// dcs.MaxHistory entries.
func AppendHistory(h []dcs.HistoryEntry, e dcs.HistoryEntry) []dcs.HistoryEntry {
	h = append(append(make([]dcs.HistoryEntry, 0, len(h)+1), h...), e)
	if len(h) > dcs.MaxHistory {
		h = h[len(h)-dcs.MaxHistory:]
	}
	return h
}

// EncodeHistory encodes a history (entries already validated).
func EncodeHistory(h []dcs.HistoryEntry) ([]byte, error) {
	js := make([]historyJSON, len(h))
	for i, e := range h {
		js[i] = historyJSON{Kind: e.KindString(), From: e.From, To: e.To, At: e.At.UTC(), Reason: e.Reason}
		if e.WriteUnavailable != 0 {
			js[i].WriteUnavailable = e.WriteUnavailable.String()
		}
	}
	return json.Marshal(js)
}

// DecodeHistory decodes a stored history.
func DecodeHistory(where string, b []byte) ([]dcs.HistoryEntry, error) {
	var js []historyJSON
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, corrupt(where, "history is not a valid JSON list", err)
	}
	h := make([]dcs.HistoryEntry, 0, len(js))
	for i, j := range js {
		e := dcs.HistoryEntry{From: j.From, To: j.To, At: j.At, Reason: j.Reason}
		var err error
		if e.Kind, err = dcs.ParseHistoryKind(j.Kind); err != nil && isKindName(j.Kind) {
			e.Kind, e.KindName, err = dcs.HistoryOther, j.Kind, nil // a newer version's
		}
		if err == nil && j.WriteUnavailable != "" {
			e.WriteUnavailable, err = time.ParseDuration(j.WriteUnavailable)
		}
		if err == nil {
			err = ValidateHistoryEntry(e)
		}
		if err != nil {
			return nil, corrupt(where, fmt.Sprintf("invalid history entry %d", i), err)
		}
		h = append(h, e)
	}
	return h, nil
}

// Corrupt returns an error wrapping dcs.ErrCorrupt that names where the
// record is stored and what is wrong with it.
func Corrupt(where, what string, cause error) error { return corrupt(where, what, cause) }

func corrupt(where, what string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s: %s", dcs.ErrCorrupt, where, what)
	}
	return fmt.Errorf("%w: %s: %s: %v", dcs.ErrCorrupt, where, what, cause)
}
