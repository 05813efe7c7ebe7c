//go:build tools

// Package tools pins the Kubernetes binaries that the DCS, agent and e2e
// tests run against: the control plane, and the kubelet and kube-proxy of
// the real node. It lives in its own module so that
// k8s.io/kubernetes never enters the product's go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
