// Package onnode runs the product as users run it: deploy/ built with
// kustomize, applied through client-go to a real single-node Kubernetes
// (e2e/realnode: kubelet, containerd, kube-proxy), with the MariaDB and agent
// images built from Debian packages and the source tree (e2e/images). Its
// tests write through the primary Service's ClusterIP, as an application
// would, and delete, restart and evict pods.
//
// The fault scenarios, one file each (scenario_test.go runs them), inject
// a fault with e2e/fault, heal it, and judge the trial with e2e/checker:
// acknowledged writes lost, instants with two writable or two routable
// members, the longest outage, GTID convergence; beside the writer, a bank
// (bank_test.go) and, where nothing may be lost, a register checked for
// linearizability (register_test.go) run through the primary Service
// (clients_test.go). -onnode.trials sets the
// trials per scenario; -onnode.report collects the per-scenario reports.
//
// The tests share one deployment, and none depends on another's order:
// they run shuffled (-test.shuffle). deployed checks the cluster before
// each test (three Ready pods, one primary routed, nothing errant or
// broken, the GTID positions equal) and starts it over when it is not;
// when the test ends, a cluster it spoiled (c.spoil: purged binary logs)
// or left unhealthy is started over on that test's time, and a passing
// test that left it unhealthy fails (health_test.go).
//
// The tests need root, the node's packages and binaries (make deps installs
// and builds them); they are skipped with -short only.
package onnode
