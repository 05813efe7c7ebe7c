package kubernetes

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ClusterNames lists the clusters that have Leases in leases' namespace
// (those labelled managed-by mysqlha, by their DefaultClusterLabel),
// sorted: what agentctl offers when a command names a cluster that has
// none.
func ClusterNames(ctx context.Context, leases LeaseClient) ([]string, error) {
	selector := labels.SelectorFromSet(labels.Set{DefaultManagedByLabel: ManagedByValue}).String()
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, mapErr("listing the clusters' leases", err)
	}
	var names []string
	for _, l := range list.Items {
		if name := l.Labels[DefaultClusterLabel]; name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
