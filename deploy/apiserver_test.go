package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// TestManifestsAgainstAPIServer sends every built manifest to a real
// kube-apiserver (v1.37, kubetest) with strict field validation, so the
// server's own schemas judge them: the built-in kinds, and the PodMonitor
// and PrometheusRule against the Prometheus Operator's CRDs (vendored in
// monitoring/crds). Each variant goes to a namespace that enforces the
// restricted Pod Security profile, and a pod made from its StatefulSet's
// template must be admitted there (the PodSecurity admission plugin is
// the judge; a broken copy must be refused, so the check is live).
func TestManifestsAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (kubetest)")
	}
	srv := kubetest.Start(t)
	cfg := srv.Config()
	// The refused cases below draw PodSecurity warnings; they are expected.
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	a := &apply{t: t, dyn: dyn, mapper: mapper}
	installCRDs(t, a, filepath.Join(monitoringDir, "crds"))
	mapper.Reset()

	builds := map[string]*built{}
	dirs := map[string]string{"monitoring": monitoringDir}
	for _, v := range variants {
		dirs[v.name] = v.dir
	}
	for _, name := range []string{"base", "local-node", "mysql84", "monitoring"} {
		dir := dirs[name]
		t.Run(name, func(t *testing.T) {
			ns := "deploy-" + name
			restrictedNamespace(t, cs, ns)
			b := kustomizeBuild(t, dir)
			builds[name] = b
			for _, u := range b.all {
				if err := a.create(t.Context(), ns, u); err != nil {
					t.Errorf("%s/%s refused: %v", u.GetKind(), u.GetName(), err)
				}
			}
			for _, o := range b.typed {
				if sts, ok := o.(*appsv1.StatefulSet); ok {
					if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), podFrom(sts, ns), metav1.CreateOptions{}); err != nil {
						t.Errorf("a pod of StatefulSet %s is refused in a restricted namespace: %v", sts.Name, err)
					}
				}
			}
		})
	}

	// The checks above would pass vacuously if the server accepted
	// anything: these must be refused.
	t.Run("refused", func(t *testing.T) {
		base, mon := builds["base"], builds["monitoring"]
		if base == nil || mon == nil {
			t.Skip("the builds failed")
		}
		ns := "deploy-refused"
		restrictedNamespace(t, cs, ns)
		ctx := t.Context()

		sts := only[*appsv1.StatefulSet](t, base)
		pod := podFrom(sts, ns)
		agentC := mustContainer(t, pod.Spec.Containers, "agent")
		yes := true
		agentC.SecurityContext.AllowPrivilegeEscalation = &yes
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
			t.Errorf("a pod whose agent may escalate privileges: %v, want Forbidden by PodSecurity restricted", err)
		}

		for _, tc := range []struct {
			what   string
			from   *built
			kind   string
			mutate func(u *unstructured.Unstructured)
		}{
			{"an alert with for: banana", mon, "PrometheusRule", func(u *unstructured.Unstructured) {
				setRuleField(t, u, "for", "banana")
			}},
			{"an alert with an unknown field", mon, "PrometheusRule", func(u *unstructured.Unstructured) {
				setRuleField(t, u, "severity", "critical") // belongs under labels
			}},
			{"a scrape interval that is no duration", mon, "PodMonitor", func(u *unstructured.Unstructured) {
				eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "podMetricsEndpoints")
				eps[0].(map[string]any)["interval"] = "often"
				unstructured.SetNestedSlice(u.Object, eps, "spec", "podMetricsEndpoints")
			}},
			{"a container with an unknown field", base, "StatefulSet", func(u *unstructured.Unstructured) {
				ctrs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				ctrs[0].(map[string]any)["restartPolicyy"] = "Always"
				unstructured.SetNestedSlice(u.Object, ctrs, "spec", "template", "spec", "containers")
			}},
		} {
			var u *unstructured.Unstructured
			for _, o := range tc.from.all {
				if o.GetKind() == tc.kind {
					u = o.DeepCopy()
				}
			}
			if u == nil {
				t.Fatalf("no %s", tc.kind)
			}
			u.SetName("refused")
			tc.mutate(u)
			if err := a.create(ctx, ns, u); err == nil || !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
				t.Errorf("%s: %v, want Invalid or BadRequest", tc.what, err)
			} else {
				t.Logf("%s: refused: %v", tc.what, err)
			}
		}
	})
}

// apply creates unstructured objects through the dynamic client.
type apply struct {
	t      *testing.T
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func (a *apply) create(ctx context.Context, ns string, obj *unstructured.Unstructured) error {
	u := obj.DeepCopy()
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		u.SetNamespace(ns)
		r = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = r.Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	return err
}

// installCRDs creates the CRDs in dir and waits until they are served.
func installCRDs(t *testing.T, a *apply, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("CRD files in %s: %v %v", dir, files, err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := a.dyn.Resource(crdGVR).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing %s: %v", f, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := a.dyn.Resource(crdGVR).Get(t.Context(), u.GetName(), metav1.GetOptions{})
			if err == nil && crdEstablished(got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established after 30 s: %v", u.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// restrictedNamespace creates ns enforcing the restricted Pod Security
// profile, as the README's install steps label the namespace.
func restrictedNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// podFrom is pod 0 of sts as the StatefulSet controller would make it.
func podFrom(sts *appsv1.StatefulSet, ns string) *corev1.Pod {
	name := sts.Name + "-0"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: sts.Spec.Template.Labels},
		Spec:       *sts.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.Hostname, pod.Spec.Subdomain = name, sts.Spec.ServiceName
	for _, c := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + name},
		}})
	}
	return pod
}

// setRuleField sets field of the first rule of the first group.
func setRuleField(t *testing.T, u *unstructured.Unstructured, field, value string) {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(u.Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("no groups: %v", err)
	}
	rules := groups[0].(map[string]any)["rules"].([]any)
	rules[0].(map[string]any)[field] = value
	if err := unstructured.SetNestedSlice(u.Object, groups, "spec", "groups"); err != nil {
		t.Fatal(err)
	}
}
