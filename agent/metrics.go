package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/dcs"
)

// MetricsPrefix prefixes every metric of the agent.
const MetricsPrefix = "mysqlha_"

// Metrics are the agent's Prometheus series. The cluster and member are
// constant labels, so one scrape config serves every pod.
type Metrics struct {
	IsLeader          prometheus.Gauge
	Role              *prometheus.GaugeVec
	RenewLatency      prometheus.Histogram
	RenewFailures     prometheus.Counter
	LoopDuration      prometheus.Histogram
	LagSeconds        prometheus.Gauge
	LagTransactions   prometheus.Gauge
	Failovers         prometheus.Counter
	Switchovers       prometheus.Counter
	LastFailoverPhase *prometheus.GaugeVec
	FencingActions    *prometheus.CounterVec
	DCSErrors         *prometheus.CounterVec
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
}

// NewMetrics registers the agent's metrics on reg.
func NewMetrics(reg prometheus.Registerer, cluster, member string) *Metrics {
	labels := prometheus.Labels{"cluster": cluster, "member": member}
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Name: MetricsPrefix + name, Help: help, ConstLabels: labels}
	}
	lockBuckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &Metrics{
		IsLeader: prometheus.NewGauge(prometheus.GaugeOpts(f("is_leader", "1 while this member holds the leader lock."))),
		Role: prometheus.NewGaugeVec(prometheus.GaugeOpts(f("role",
			"1 for the member's current role (primary, replica, none).")), []string{"role"}),
		RenewLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricsPrefix + "lock_renew_seconds",
			Help: "Latency of successful leader lock renewals.", ConstLabels: labels, Buckets: lockBuckets}),
		RenewFailures: prometheus.NewCounter(prometheus.CounterOpts(f("lock_renew_failures_total", "Failed leader lock renewals."))),
		LoopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricsPrefix + "loop_duration_seconds",
			Help: "Duration of one HA loop iteration.", ConstLabels: labels, Buckets: lockBuckets}),
		LagSeconds: prometheus.NewGauge(prometheus.GaugeOpts(f("replication_lag_seconds",
			"Replication delay reported by the replica (Seconds_Behind_Source); -1 when unknown."))),
		LagTransactions: prometheus.NewGauge(prometheus.GaugeOpts(f("replication_lag_transactions",
			"Transactions the leader has executed that this replica has not, from the last published records."))),
		Failovers:   prometheus.NewCounter(prometheus.CounterOpts(f("failovers_total", "Unplanned promotions of this member."))),
		Switchovers: prometheus.NewCounter(prometheus.CounterOpts(f("switchovers_total", "Planned hand-overs this member took part in."))),
		LastFailoverPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts(f("last_failover_phase_seconds",
			"Duration of the phases of this member's last promotion: detect (leader lost to lock won), promote (lock won to writable), route (writable to primary label set).")),
			[]string{"phase"}),
		FencingActions: prometheus.NewCounterVec(prometheus.CounterOpts(f("fencing_actions_total",
			"Fencing actions taken, by kind (self, self-deadline, duplicate, remote-source, remote-writable, replica-receiver, kill-hung).")), []string{"kind"}),
		DCSErrors: prometheus.NewCounterVec(prometheus.CounterOpts(f("dcs_errors_total",
			"DCS calls that failed, by operation.")), []string{"op"}),
		DuplicateIdentity: prometheus.NewGauge(prometheus.GaugeOpts(f("duplicate_identity",
			"1 while another live agent publishes our member name: this agent refuses to act and keeps mysqld fenced."))),
		SemiSyncReplicas: prometheus.NewGauge(prometheus.GaugeOpts(f("semi_sync_acknowledging_replicas",
			"Replicas acknowledging this primary's commits (semi-sync clients)."))),
		SemiSyncWaiting: prometheus.NewGauge(prometheus.GaugeOpts(f("semi_sync_waiting_commits",
			"Commits on this primary waiting for a replica's acknowledgement."))),
		SemiSyncStalled: prometheus.NewGauge(prometheus.GaugeOpts(f("semi_sync_stalled",
			"1 while semi_sync strict leaves this primary's writes waiting with no replica acknowledging."))),
		FailsafeActive: prometheus.NewGauge(prometheus.GaugeOpts(f("failsafe_active",
			"1 while this leader stays writable on every member's confirmation, the DCS being unreachable (failsafe mode)."))),
	}
	reg.MustRegister(m.IsLeader, m.Role, m.RenewLatency, m.RenewFailures, m.LoopDuration, m.LagSeconds,
		m.LagTransactions, m.Failovers, m.Switchovers, m.LastFailoverPhase, m.FencingActions, m.DCSErrors, m.DuplicateIdentity,
		m.SemiSyncReplicas, m.SemiSyncWaiting, m.SemiSyncStalled, m.FailsafeActive)
	return m
}

func (m *Metrics) setRole(r dcs.Role) {
	for _, x := range []dcs.Role{dcs.RolePrimary, dcs.RoleReplica, dcs.RoleUnknown} {
		v := 0.0
		if x == r {
			v = 1
		}
		m.Role.WithLabelValues(roleName(x)).Set(v)
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
