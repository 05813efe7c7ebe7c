// Package deploy holds the Kubernetes manifests; its test keeps the RBAC
// Role in step with what the code actually calls.
package deploy

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/agent/podrole"
	dcskube "github.com/mysqlha/mysqlha/dcs/kubernetes"
)

// flatten turns rules into sorted "group/resource:verb" strings.
func flatten(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestRoleMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile("base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.Role
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var r rbacv1.Role
		if err := yaml.Unmarshal(doc, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "Role" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("rbac.yaml has no Role")
	}
	got := flatten(role.Rules)
	want := flatten(append(dcskube.RBACRules(), podrole.RBACRules()...))
	if !slices.Equal(got, want) {
		t.Fatalf("deploy/base/rbac.yaml grants\n  %s\nbut the code needs exactly\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
