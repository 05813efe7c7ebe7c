package podrole

import rbacv1 "k8s.io/api/rbac/v1"

// RBACRules returns the namespace-scoped rules (for a Role, not a
// ClusterRole) that this package needs, and nothing more:
//
//   - pods get: SetRole reads the pod to skip writes that change nothing;
//     the Event writer reads the pod's UID.
//   - pods patch: SetRole and RemovePrimary.
//   - events create: Event. No "patch": Events are never aggregated.
//   - endpointslices get, create, update: PrimaryRoute, the primary
//     Service's one slice, read before every write.
//
// No list or watch: the package reads single pods by name rather than
// through an informer, which would need both and cache every pod of the
// namespace to save one GET per SetRole. The agent's other duties (leases,
// its own pod watch if any) bring their own rules.
func RBACRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "create", "update"}},
	}
}
