package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The NetworkPolicy covers the members, leaves the database port to the
// applications, and admits to the agents' API only the cluster's pods and
// the monitoring namespace, in every variant.
func TestNetworkPolicyClosesTheAPI(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b := kustomizeBuild(t, v.dir)
			np := only[*networkingv1.NetworkPolicy](t, b)
			pod := only[*appsv1.StatefulSet](t, b).Spec.Template
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
				t.Fatalf("podSelector %+v does not select the members %v (%v)", np.Spec.PodSelector, pod.Labels, err)
			}
			open, api := map[int]bool{}, map[int][]networkingv1.NetworkPolicyPeer{}
			for _, r := range np.Spec.Ingress {
				for _, p := range r.Ports {
					if len(r.From) == 0 {
						open[p.Port.IntValue()] = true
					} else {
						api[p.Port.IntValue()] = append(api[p.Port.IntValue()], r.From...)
					}
				}
			}
			if !open[3306] || open[8008] {
				t.Errorf("open to all: %v; want 3306 and not the API's 8008", open)
			}
			var peers, monitoring bool
			for _, f := range api[8008] {
				switch {
				case f.PodSelector != nil && f.NamespaceSelector == nil:
					s, _ := metav1.LabelSelectorAsSelector(f.PodSelector)
					peers = !s.Empty() && s.Matches(labels.Set(pod.Labels))
				case f.NamespaceSelector != nil:
					monitoring = f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring"
				default:
					t.Errorf("8008 admits %+v", f)
				}
			}
			if !peers || !monitoring {
				t.Errorf("8008 from %+v: want the members themselves and the monitoring namespace", api[8008])
			}
		})
	}
}
