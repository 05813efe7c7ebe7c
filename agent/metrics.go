package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// MetricsPrefix prefixes every metric of the agent.
const MetricsPrefix = "mysqlha_"

// Metrics are the agent's Prometheus series. The cluster and member are
// constant labels, so one scrape config serves every pod.
//
// Every labelled series exists from registration on, at 0, so that
// rate() and absence alerts see the first event; the label values are
// typed enums (fenceKind, dcsOp, failoverPhase, dcs.Role) that NewMetrics
// walks, and the vectors are set only through methods that take them.
// A value that is unknown is an absent series (optionalGauge), never a
// sentinel.
type Metrics struct {
	IsLeader      prometheus.Gauge
	RenewLatency  prometheus.Histogram
	RenewFailures prometheus.Counter
	// DeadmanFailures counts failures to arm or push back the dead-man
	// switch (an event in mysqld that fences it at the lock deadline).
	DeadmanFailures   prometheus.Counter
	LoopDuration      prometheus.Histogram
	Failovers         prometheus.Counter
	Switchovers       prometheus.Counter
	DuplicateIdentity prometheus.Gauge
	// Semi-sync, set while semi_sync is not off: the primary's
	// acknowledging replicas and waiting commits, and 1 while strict mode
	// leaves writes waiting with no replica to acknowledge them.
	SemiSyncReplicas prometheus.Gauge
	SemiSyncWaiting  prometheus.Gauge
	SemiSyncStalled  prometheus.Gauge
	// FailsafeActive is 1 while this leader stays writable by failsafe
	// confirmations, the DCS being unreachable.
	FailsafeActive prometheus.Gauge
	// What alerts watch: the cluster as this member sees it, its mysqld,
	// and when it last reached the DCS.
	Paused         prometheus.Gauge
	MySQLUp        prometheus.Gauge
	Errant         prometheus.Gauge
	DCSLastSuccess prometheus.Gauge
	// Self-healing: 1 while this member needs a rebuild (saving first,
	// waiting, or refused by a setting); the rebuilds its agent asked for;
	// the transactions it saved before one.
	RebuildNeeded     prometheus.Gauge
	Rebuilding        prometheus.Gauge
	AutoRebuilds      prometheus.Counter
	SavedTransactions prometheus.Counter
	// FailoverCandidate is 1 while this member may take over from the
	// leader (failover.Ineligibility): the cluster has no candidate when no
	// member shows it. The settings the alerts compare against ride along,
	// so that a rule need not repeat them.
	FailoverCandidate prometheus.Gauge
	TTL               prometheus.Gauge
	MaxLag            prometheus.Gauge

	clusterUnlocked optionalGauge
	lagSeconds      optionalGauge
	lagTransactions optionalGauge
	readOnly        optionalGauge
	ioRunning       optionalGauge
	sqlRunning      optionalGauge

	role           *prometheus.GaugeVec
	failoverPhase  *prometheus.GaugeVec
	fencingActions *prometheus.CounterVec
	dcsErrors      *prometheus.CounterVec
}

// fenceKind is the kind label of fencing_actions_total.
type fenceKind uint8

const (
	fenceKindSelf            fenceKind = iota // our mysqld: the lock lost or given up, or a decision
	fenceKindSelfDeadline                     // our mysqld, past the lock deadline (loop or watchdog)
	fenceKindDuplicate                        // our mysqld: another live agent has our member name
	fenceKindRemoteSource                     // the old source, fenced by our promotion
	fenceKindRemoteWritable                   // a writable peer, fenced by the leader
	fenceKindReplicaReceiver                  // a replica's receiver stopped by our promotion
	fenceKindKillHung                         // our hung mysqld killed
	numFenceKinds
)

var fenceKindNames = [numFenceKinds]string{
	fenceKindSelf: "self", fenceKindSelfDeadline: "self-deadline", fenceKindDuplicate: "duplicate",
	fenceKindRemoteSource: "remote-source", fenceKindRemoteWritable: "remote-writable",
	fenceKindReplicaReceiver: "replica-receiver", fenceKindKillHung: "kill-hung",
}

func (k fenceKind) String() string { return enumName(fenceKindNames[:], k, "fenceKind") }

// dcsOp is the op label of dcs_errors_total.
type dcsOp uint8

const (
	dcsOpRead dcsOp = iota
	dcsOpRenew
	dcsOpAcquire
	dcsOpRelease
	dcsOpTakeOver
	dcsOpMember
	numDCSOps
)

var dcsOpNames = [numDCSOps]string{
	dcsOpRead: "read", dcsOpRenew: "renew", dcsOpAcquire: "acquire", dcsOpRelease: "release",
	dcsOpTakeOver: "take-over", dcsOpMember: "member",
}

func (o dcsOp) String() string { return enumName(dcsOpNames[:], o, "dcsOp") }

// failoverPhase is the phase label of last_failover_phase_seconds.
type failoverPhase uint8

const (
	phaseDetect  failoverPhase = iota // leader lost to lock won
	phasePromote                      // lock won to writable
	phaseRoute                        // writable to primary label set
	numFailoverPhases
)

var failoverPhaseNames = [numFailoverPhases]string{phaseDetect: "detect", phasePromote: "promote", phaseRoute: "route"}

func (p failoverPhase) String() string { return enumName(failoverPhaseNames[:], p, "failoverPhase") }

// enumName names v, or says which type's value is unnamed: a label value
// that no series was initialised with.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// optionalGauge is a gauge whose series is absent while its value is
// unknown: a sentinel such as -1 would pass for a value in alerts, sums
// and graphs.
type optionalGauge struct{ vec *prometheus.GaugeVec }

func newOptionalGauge(opts prometheus.Opts) optionalGauge {
	return optionalGauge{prometheus.NewGaugeVec(prometheus.GaugeOpts(opts), nil)}
}

// set publishes v, or removes the series when the value is not known.
func (g optionalGauge) set(v float64, known bool) {
	if !known {
		g.vec.Reset()
		return
	}
	g.vec.WithLabelValues().Set(v)
}

// NewMetrics registers the agent's metrics, and Go's go_build_info, on reg.
func NewMetrics(reg prometheus.Registerer, cluster, member string) *Metrics {
	labels := prometheus.Labels{"cluster": cluster, "member": member}
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Name: MetricsPrefix + name, Help: help, ConstLabels: labels}
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(f(name, help)))
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(f(name, help)))
	}
	lockBuckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &Metrics{
		IsLeader: gauge("is_leader", "1 while this member holds the leader lock."),
		RenewLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricsPrefix + "lock_renew_duration_seconds",
			Help: "Latency of successful leader lock renewals.", ConstLabels: labels, Buckets: lockBuckets}),
		RenewFailures: prometheus.NewCounter(prometheus.CounterOpts(f("lock_renew_failures_total", "Failed leader lock renewals."))),
		DeadmanFailures: prometheus.NewCounter(prometheus.CounterOpts(f("deadman_failures_total",
			"Failures to arm or push back the dead-man switch, the event in mysqld that fences it at the lock deadline without the agent: a promotion then stays read-only, a primary fences itself at its previous deadline."))),
		LoopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricsPrefix + "loop_duration_seconds",
			Help: "Duration of one HA loop iteration.", ConstLabels: labels, Buckets: lockBuckets}),
		Failovers:   prometheus.NewCounter(prometheus.CounterOpts(f("failovers_total", "Unplanned promotions of this member."))),
		Switchovers: prometheus.NewCounter(prometheus.CounterOpts(f("switchovers_total", "Planned hand-overs this member took part in."))),
		DuplicateIdentity: gauge("duplicate_identity",
			"1 while another live agent publishes our member name: this agent refuses to act and keeps mysqld fenced."),
		SemiSyncReplicas: gauge("semi_sync_acknowledging_replicas",
			"Replicas acknowledging this primary's commits (semi-sync clients); 0 with semi_sync off."),
		SemiSyncWaiting: gauge("semi_sync_waiting_commits",
			"Commits on this primary waiting for a replica's acknowledgement; 0 with semi_sync off."),
		SemiSyncStalled: gauge("semi_sync_stalled",
			"1 while semi_sync strict leaves this primary's writes waiting with no replica acknowledging."),
		FailsafeActive: gauge("failsafe_active",
			"1 while this leader stays writable on every member's confirmation, the DCS being unreachable (failsafe mode)."),
		Paused:  gauge("paused", "1 while the cluster is paused (maintenance mode): no automatic failover."),
		MySQLUp: gauge("mysql_up", "1 while the local mysqld answers."),
		Errant: gauge("errant",
			"1 while this member has transactions the leader lacks (errant GTIDs): it does not replicate until they are resolved."),
		RebuildNeeded: gauge("rebuild_needed",
			"1 while this member cannot follow the leader on its own data (transactions the leader lacks, or binary logs its source purged) and is not being rebuilt yet: /status healing says why."),
		Rebuilding: gauge("rebuilding",
			"1 while this member is being rebuilt from a donor (agentctl reinit, or an automatic rebuild)."),
		FailoverCandidate: gauge("failover_candidate",
			"1 while this member may take over if the leader fails: not the leader, mysqld up, not nofailover, errant, rebuilding or broken, within maximum_lag_on_failover, acknowledging under semi_sync strict."),
		TTL: gauge("ttl_seconds", "The cluster's ttl setting: how long the leader lock lives without a renewal."),
		MaxLag: gauge("maximum_lag_on_failover_seconds",
			"The cluster's maximum_lag_on_failover setting: a replica further behind is no failover candidate; 0 means no limit."),
		AutoRebuilds: counter("automatic_rebuilds_total",
			"Rebuilds of this member its agent requested by itself (rebuild_diverged, reseed_after)."),
		SavedTransactions: counter("saved_transactions_total",
			"Transactions the leader lacked that this member saved to a file on its volume before an automatic rebuild."),
		DCSLastSuccess: gauge("dcs_last_success_timestamp_seconds",
			"Unix time of this agent's last successful DCS write (lock or member record); 0 before the first."),
		clusterUnlocked: newOptionalGauge(f("cluster_unlocked",
			"1 while this member's last DCS snapshot shows no valid leader lock (none, or expired); absent before the first.")),
		lagSeconds: newOptionalGauge(f("replication_lag_seconds",
			"Replication delay of the replica: Seconds_Behind_Source while its receiver runs, then growing with the time since it last received while a leader lives (frozen without one); 0 without replication; absent while mysqld does not answer.")),
		lagTransactions: newOptionalGauge(f("replication_lag_transactions",
			"Transactions the leader has executed that this replica has not, from the last published records; absent while the leader has no record.")),
		readOnly: newOptionalGauge(f("mysql_read_only",
			"1 while the local mysqld refuses client writes (read_only on MariaDB, super_read_only on MySQL); absent while it does not answer.")),
		ioRunning: newOptionalGauge(f("replication_io_running",
			"1 while the local replica's IO thread runs, 0 while it is stopped or connecting; absent without replication or while mysqld does not answer.")),
		sqlRunning: newOptionalGauge(f("replication_sql_running",
			"1 while the local replica's SQL thread runs; absent without replication or while mysqld does not answer.")),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts(f("role",
			"1 for the member's current role, 0 for the others.")), []string{"role"}),
		failoverPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts(f("last_failover_phase_seconds",
			"Duration of the phases of this member's last promotion: detect (leader lost to lock won), promote (lock won to writable), route (writable to primary label set); 0 before the first.")),
			[]string{"phase"}),
		fencingActions: prometheus.NewCounterVec(prometheus.CounterOpts(f("fencing_actions_total",
			"Fencing actions taken, by kind: self (our mysqld, on a decision or a lost lock), self-deadline (ours, past the lock deadline), duplicate (ours, another live agent has our name), remote-source (the old source, at a promotion), remote-writable (a writable member without the lock, by the leader), replica-receiver (a replica's receiver stopped at a promotion), kill-hung (our hung mysqld killed).")),
			[]string{"kind"}),
		dcsErrors: prometheus.NewCounterVec(prometheus.CounterOpts(f("dcs_errors_total",
			"DCS calls that failed, by operation.")), []string{"op"}),
	}
	m.initLabels()
	reg.MustRegister(m.IsLeader, m.RenewLatency, m.RenewFailures, m.DeadmanFailures, m.LoopDuration, m.Failovers, m.Switchovers,
		m.DuplicateIdentity, m.SemiSyncReplicas, m.SemiSyncWaiting, m.SemiSyncStalled, m.FailsafeActive,
		m.Paused, m.MySQLUp, m.Errant, m.DCSLastSuccess, m.RebuildNeeded, m.Rebuilding, m.AutoRebuilds, m.SavedTransactions,
		m.FailoverCandidate, m.TTL, m.MaxLag,
		m.clusterUnlocked.vec, m.lagSeconds.vec, m.lagTransactions.vec, m.readOnly.vec, m.ioRunning.vec, m.sqlRunning.vec,
		m.role, m.failoverPhase, m.fencingActions, m.dcsErrors,
		collectors.NewBuildInfoCollector())
	return m
}

// initLabels creates every labelled series at 0, walking the enums.
func (m *Metrics) initLabels() {
	for r := dcs.Role(0); r.Valid(); r++ {
		m.role.WithLabelValues(roleName(r))
	}
	for p := range numFailoverPhases {
		m.failoverPhase.WithLabelValues(p.String())
	}
	for k := range numFenceKinds {
		m.fencingActions.WithLabelValues(k.String())
	}
	for op := range numDCSOps {
		m.dcsErrors.WithLabelValues(op.String())
	}
}

func (m *Metrics) setRole(r dcs.Role) {
	for x := dcs.Role(0); x.Valid(); x++ {
		v := 0.0
		if x == r {
			v = 1
		}
		m.role.WithLabelValues(roleName(x)).Set(v)
	}
}

func (m *Metrics) fenced(k fenceKind) { m.fencingActions.WithLabelValues(k.String()).Inc() }

func (m *Metrics) dcsFailed(op dcsOp) { m.dcsErrors.WithLabelValues(op.String()).Inc() }

// dcsSucceeded records a DCS write that succeeded at now. Reads do not
// count: the stores serve them from a watch cache, which answers while the
// DCS does not.
func (m *Metrics) dcsSucceeded(now time.Time) {
	m.DCSLastSuccess.Set(float64(now.UnixNano()) / 1e9)
}

// setFailoverPhase records how long phase p of the last promotion took;
// an unknown duration removes the phase's series rather than leave the
// previous promotion's there.
func (m *Metrics) setFailoverPhase(p failoverPhase, d time.Duration, known bool) {
	if !known {
		m.failoverPhase.DeleteLabelValues(p.String())
		return
	}
	m.failoverPhase.WithLabelValues(p.String()).Set(d.Seconds())
}

// setCluster records what the last DCS snapshot says of the cluster, and
// the config in force; cl is nil when the read failed, which leaves the
// lock gauge as it was.
func (m *Metrics) setCluster(cl *dcs.Cluster, cfg dcs.Config) {
	m.Paused.Set(boolGauge(cfg.Paused))
	m.TTL.Set(cfg.TTL.Seconds())
	m.MaxLag.Set(cfg.MaximumLagOnFailover.Seconds())
	if cl != nil {
		m.clusterUnlocked.set(boolGauge(cl.Leader == nil || cl.Leader.Holder == "" || cl.Leader.Expired), true)
	}
}

// setLagTransactions records how many of the leader's transactions this
// member lacks; known is false while the leader has no member record.
func (m *Metrics) setLagTransactions(n uint64, known bool) { m.lagTransactions.set(float64(n), known) }

// setLocal records what the last observation of our mysqld showed; err is
// the observation's error, lag our replication delay (replicaLag).
func (m *Metrics) setLocal(obs mysqlctl.Observation, err error, errant bool, lag *time.Duration) {
	up := err == nil
	m.MySQLUp.Set(boolGauge(up))
	m.Errant.Set(boolGauge(errant))
	m.readOnly.set(boolGauge(!obs.Status.Writable()), up)
	r := obs.Replica
	replica := up && r != nil
	m.ioRunning.set(boolGauge(replica && r.IOThread == mysqlctl.ThreadRunning), replica)
	m.sqlRunning.set(boolGauge(replica && r.SQLThread == mysqlctl.ThreadRunning), replica)
	switch {
	case up && r == nil:
		m.lagSeconds.set(0, true)
	case replica && lag != nil:
		m.lagSeconds.set(lag.Seconds(), true)
	default:
		m.lagSeconds.set(0, false)
	}
}

func (m *Metrics) setSemiSync(st *SemiSyncState) {
	var replicas, waiting, stalled float64
	if st != nil {
		replicas, waiting = float64(st.AcknowledgingReplicas), float64(st.WaitingCommits)
		if st.Stalled != "" {
			stalled = 1
		}
	}
	m.SemiSyncReplicas.Set(replicas)
	m.SemiSyncWaiting.Set(waiting)
	m.SemiSyncStalled.Set(stalled)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
