//go:build tools

// Package tools pins the Kubernetes control-plane binaries that the DCS,
// agent and e2e tests run against. It lives in its own module so that
// k8s.io/kubernetes never enters the product's go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
