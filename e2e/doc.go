// Package e2e holds end-to-end scenarios that drive real MariaDB, real agents
// and a real control plane only through public surfaces: the Kubernetes API,
// the MySQL protocol, agentctl and the agent's HTTP API. One file per
// scenario.
//
// The harness (cluster_test.go; main_test.go builds cmd/agent and
// cmd/agentctl once per test process) runs, per test, an embedded etcd (testenv/etcdtest), MariaDB servers
// (testenv/mysqltest, configured read_only=ON as a production my.cnf must
// be) and one agent process per server, each in its own process group and
// killed with the test process (testenv/localproc, shared with the demo);
// after the run, TestMain fails it if any process it started is left.
// Scenarios kill, stop, freeze and restart agents and servers, observe
// through GET /status, /primary and /metrics, root and application
// sessions, and the leader key in etcd, and run a split-brain checker that
// fails the test if two servers would take an application write at the
// same instant.
//
// Scenarios (etcd DCS, processes on loopback):
//
//	bootstrap_test.go         three empty servers elect one writable primary
//	primary_failover_test.go  kill -9 of the primary's agent and mysqld
//	rejoin_test.go            the old primary comes back as a replica
//	agent_killed_test.go      kill -9 of the primary's agent alone
//	dead_agent_test.go        kill -9 of the primary's agent, which stays dead, its
//	                          mysqld cut from its peers but not from a client: the
//	                          dead-man event refuses the client's writes before a
//	                          peer takes one
//	frozen_agent_test.go      SIGSTOP of the primary's agent beyond ttl
//	mysqld_death_test.go      the primary's mysqld dies, its agent lives
//	mysqld_hang_test.go       the primary's mysqld hangs: its agent kills it and a
//	                          replica takes over within ttl + 10 s; in lossless
//	                          mode without the kill, the resumed server acknowledges
//	                          nothing after the new primary's first write
//	lossless_test.go          semi_sync strict: ten kill -9 of the primary under a
//	                          write load lose no acknowledged write, and each old
//	                          primary rejoins
//	failsafe_test.go          failsafe mode: etcd stopped, the primary's path to it
//	                          black-holed: no demotion, no second primary
//	secrets_test.go           no password in logs, /status, /cluster, Events, --help
//	switchover_test.go        agentctl switchover --wait under a write load: nothing
//	                          acknowledged is lost, the old primary follows
//	switchover_refused_test.go  agentctl switchover to a replica more than
//	                          failover.SwitchoverMaxBehind behind, under an
//	                          unthrottled writer: refused before any fence, exit 9
//	                          with the reason, no write gap, nothing lost
//	pause_test.go             agentctl pause: no failover after kill -9 of the
//	                          primary; agentctl resume --wait brings it back
//	agentctl_errors_test.go   every documented agentctl exit code and --help
//	reinit_test.go            the primary purged its binary logs; an emptied member
//	                          is rebuilt from a replica's mariabackup stream
//	                          (ctl.CLI.Reinit --wait) and replicates every row
//
// Fault injections (each prints one INJECTIONS summary line, injections_test.go):
//
//	fence_under_load_test.go    kill -9 of the primary's agent during a long UPDATE
//	                            and a write load, ten trials on one cluster: the
//	                            fence kills the session in its way, nothing
//	                            acknowledged is lost, the old primary rejoins
//	duplicate_identity_test.go  a second agent started with a live member's
//	                            --name (the leader's, then a replica's followed by
//	                            the leader's death) refuses to act and never leads
//	unreachable_peers_test.go   the primary dies and another member is cut off
//	                            behind a black-holed proxy (netproxy_test.go), on
//	                            etcd and on Kubernetes: the survivor promotes
//	                            within ttl + 3 s
//
// Kubernetes mode (Options.Kubernetes, kube_test.go): the agents run with
// --dcs=kubernetes against one real kube-apiserver and kube-controller-manager
// shared by the test process (kubetest), each cluster in its own namespace
// with Pods as API objects (Ready, pod IPs from 198.18.0.0/15 as data only),
// the primary and replicas Services, and the agent's Role bound to the
// identity the agents use. agentctl (agentctl_test.go) is the real binary,
// built once per test process.
//
//	k8s_failover_test.go      kill -9 of the primary: the Lease, the role labels
//	                          and the Services' endpoints move; Events recorded
//	switchover_test.go        TestSwitchoverKubernetes: labels follow a switchover
//
// failover_bench_test.go measures failover time by phase and an idle agent's
// memory and CPU, switchover_bench_test.go the write unavailability of
// agentctl switchover under load on etcd and on Kubernetes,
// lossless_test.go lossless failovers, mysqld_hang_test.go the hung-primary
// outage in both modes (go test -run '^$' -bench . -benchtime 1x ./e2e/).
//
// The tests need mariadbd and are skipped with -short; the Kubernetes ones
// also need the control-plane binaries of `make kube-bin`.
package e2e
