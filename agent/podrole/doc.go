// Package podrole is the HA agent's Kubernetes surface for its pod's role: it
// owns the cluster and role labels of the cluster's pods (which the
// <cluster>-primary and <cluster>-replicas Services select on) and the
// Kubernetes Events the agent reports about them.
//
// Guarantees:
//
//   - Labels are only ever patched, never updated, and a patch names only the
//     cluster and role label keys, so writers of other labels, annotations or
//     the spec (the StatefulSet controller, kubectl, other agents) are never
//     clobbered.
//   - SetRole is idempotent and writes at most once per actual change: it
//     reads the pod (one GET) and patches only if the labels differ, so an
//     agent may call it every loop without a write per loop.
//   - RemovePrimary removes the role label only if its value is still
//     "primary" at the moment the API server applies the patch (a JSON patch
//     "test" operation), so a new leader dropping the old leader's label can
//     never erase a "replica" label that the old leader's agent wrote
//     concurrently.
//   - Event never blocks and never fails its caller: Events are queued, written
//     by one goroutine with a bounded timeout, dropped (and logged) when the
//     queue is full, and flushed by Close within a bounded time.
//   - A 403 names the missing verb and resource and says how to fix it
//     (ErrForbidden); RBACRules is exactly what the package uses.
//
// What it does not guarantee: labels are not fencing. A partitioned old
// primary keeps its label until someone who can reach the API server removes
// it, and the Service endpoints follow labels only as fast as the endpoints
// controller does; the agent must make a demoted mysqld read-only itself
// (the fence deadline).
package podrole
