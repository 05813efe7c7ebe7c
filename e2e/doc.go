// Package e2e holds the loopback end-to-end suite: scenarios that drive real
// MariaDB, real agents and a real control plane, all as processes on
// loopback, only through public surfaces: the Kubernetes API, the MySQL
// protocol, agentctl and the agent's HTTP API.
//
// # Two suites, one judge
//
// The product promises never two writable primaries and nothing
// acknowledged lost. Two suites test it, and e2e/checker, a pure package,
// is the one judge of both: each suite records samples of every member's
// writability (checker.Sample), the writes the client got acknowledged
// (checker.Write) and every member's rows and GTID position at the end
// (checker.Final); checker.Analyze and Report.Violations decide, against
// what the scenario promises (checker.Expect). A rule changes there, with a
// unit test on a made-up history, never in a suite. On the node, the same
// package also judges a bank (checker.CheckBank) and a register history
// for linearizability (checker.CheckRegister, with porcupine).
//
//   - This package (loopback): seconds per scenario, etcd or a real
//     kube-apiserver without a kubelet (Pods as API objects). Faults are
//     what a process can do to another: kill -9, SIGSTOP, SIGTERM, a
//     black-holed TCP proxy, a stopped etcd. Most scenarios run here.
//   - e2e/onnode (see its doc.go): deploy/ on a real single-node Kubernetes
//     (e2e/realnode) with the real images, writes through the primary
//     Service, faults injected into pod network namespaces (e2e/fault). For
//     what needs a kubelet, Services and real networking: pod deletion and
//     eviction, rollouts, partitions, delays. It needs root and is slow.
//
// A new scenario goes here unless it needs a kubelet, a pod network or the
// images: one file per scenario, <what_happens>_test.go, with a comment
// saying what is done and what is promised, a Test function, and a Monitor
// (and a Writer, when writes are at stake) whose verdict fails the test.
// An onnode scenario is one <fault>_test.go in e2e/onnode, run by its
// scenario_test.go.
//
// # Harness
//
//	main_test.go        builds cmd/agent and cmd/agentctl once per test process;
//	                    TestMain fails the run if a process it started is left
//	cluster_test.go     per test: an embedded etcd (testenv/etcdtest), MariaDB
//	                    servers (testenv/mysqltest, read_only=ON as a
//	                    production my.cnf must be), one agent process per server
//	                    in its own process group (testenv/localproc)
//	kube_test.go        Kubernetes mode (Options.Kubernetes): one kube-apiserver
//	                    and kube-controller-manager per test process, each
//	                    cluster in its own namespace, Pods, Services, the agents'
//	                    Role
//	observe_test.go     GET /status, /primary, /metrics, root and application
//	                    sessions, the leader key, WaitHealthy
//	agentctl_test.go    the real agentctl binary with the cluster's DCS flags
//	netproxy_test.go    a TCP proxy in front of a mysqld that can black-hole
//	monitor_test.go     the Monitor: reads every server's @@read_only about
//	                    every 10 ms, records each read as a checker.Sample
//	                    (sent and answered), and hands the samples to the judge
//	                    when it stops (Stop: two writable members at any
//	                    instant; Judge: with writes and finals); JudgeWrites
//	                    judges writes alone at a moment of the scenario's
//	load_test.go        the Writer: an application inserting sequential ids into
//	                    whichever member GET /primary names; Finals reads the
//	                    members' rows and GTID positions for the judge
//	injections_test.go  the INJECTIONS summary line of fault-injection scenarios
//	logcheck_test.go    the agents' JSON logs repeat no key
//
// # Scenarios (etcd DCS, processes on loopback)
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
//	sigterm_test.go           SIGTERM of the primary's agent hands the lock over
//	mysqld_death_test.go      the primary's mysqld dies, its agent lives
//	mysqld_hang_test.go       the primary's mysqld hangs: its agent kills it and a
//	                          replica takes over within ttl + 10 s; in lossless
//	                          mode without the kill, the resumed server acknowledges
//	                          nothing after the new primary's first write
//	lossless_test.go          semi_sync strict: ten kill -9 of the primary under a
//	                          write load lose no acknowledged write, and each old
//	                          primary rejoins
//	data_before_eligibility_test.go  lossless: a write acknowledged by a
//	                          --nofailover member alone survives the primary's death
//	leftover_record_test.go   lossless: a removed member's stale record does not
//	                          block a promotion
//	errant_fork_test.go       a replica that wrote on its own is reported errant
//	failsafe_test.go          failsafe mode: etcd stopped, the primary's path to it
//	                          black-holed: no demotion, no second primary
//	config_test.go            agentctl set-config takes effect in running agents
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
//	haproxy_test.go           docs/haproxy.cfg in Debian's HAProxy: the primary port
//	                          reaches the primary only, the replica port replicas,
//	                          a switchover moves it; --on-role-change hooks hear
//	                          every member's roles
//	self_heal_test.go         a diverged old primary (a transaction only it holds)
//	                          saves it to a file, is rebuilt by its own agent and
//	                          follows; the file replays the write on the primary
//
// Fault injections (each prints one INJECTIONS summary line):
//
//	fence_under_load_test.go    kill -9 of the primary's agent during a long UPDATE
//	                            and a write load, ten trials on one cluster: the
//	                            fence kills the session in its way, nothing
//	                            acknowledged is lost, the old primary rejoins
//	duplicate_identity_test.go  a second agent started with a live member's
//	                            --name (the leader's, then a replica's followed by
//	                            the leader's death) refuses to act and never leads
//	unreachable_peers_test.go   the primary dies and another member is cut off
//	                            behind a black-holed proxy, on etcd and on
//	                            Kubernetes: the survivor promotes within ttl + 3 s
//
// Kubernetes mode (kube_test.go): the agents run with --dcs=kubernetes, the
// Pods' Ready and IPs (198.18.0.0/15, data only) set by the harness.
//
//	k8s_failover_test.go      kill -9 of the primary: the Lease, the role labels
//	                          and the Services' endpoints move; Events recorded
//	switchover_test.go        TestSwitchoverKubernetes: labels follow a switchover
//
// # What the judge is told here
//
// The Monitor reads through root sessions on each server's socket; the
// application user lacks READ_ONLY ADMIN, so read_only=0 is exactly "an
// application write would succeed". Its samples carry Asked, so the checker
// counts a member writable only between two writable answers: a hand-over
// between two reads is not a split brain, and a hung server that does not
// answer is not counted. Labelled and Routed are left false (no pod
// network here; k8s_failover_test.go checks labels and endpoints itself).
// Loopback scenarios promise Expect{}: nothing acknowledged is lost. Those
// that kill a primary's mysqld under load run semi-sync
// (lossless_test.go, duplicate_identity_test.go) or stop the writer before
// the fault (unreachable_peers_test.go); the others lose no server under
// load. Finals wait for the replicas to hold every acknowledged write and
// agree on their GTID position; a member that cannot be read fails the
// verdict.
// Write-unavailability bounds stay in the scenarios, which measure them
// from the fault rather than over the whole window.
//
// # Benchmarks
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
