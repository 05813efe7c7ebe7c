// Package podrole is the HA agent's Kubernetes surface for its pod's role: it
// owns the cluster and role labels of the cluster's pods (which the
// <cluster>-replicas Service selects on), the primary Service's one
// EndpointSlice (PrimaryRoute), and the Kubernetes Events the agent reports
// about them.
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
//   - PrimaryRoute names one pod, and moves from one to the next in one
//     update carrying the version it read: a concurrent writer is a
//     conflict, never overwritten.
//   - A 403 names the missing verb and resource and says how to fix it
//     (ErrForbidden); RBACRules is exactly what the package uses.
//
// What it does not guarantee: labels are not fencing. A partitioned old
// primary keeps its label, and its route, until someone who can reach the API
// server replaces them, and a Service that selects labels follows them only
// as fast as the EndpointSlice controller does; the agent must make a
// demoted mysqld read-only itself (the fence deadline).
package podrole
