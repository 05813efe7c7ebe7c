// Package realnode brings up a real single-node Kubernetes cluster on this
// machine, as child processes of the test, with no Docker and no registry,
// and tears it all down again.
//
// The node: an in-process etcd and a kube-apiserver (package kubetest) with
// Node,RBAC authorization and ServiceAccount admission;
// kube-controller-manager (Controllers); kube-scheduler; Debian's
// containerd 1.6 with runc, its sandbox image a pause image built here from
// ./pause; a kubelet; kube-proxy in iptables mode. Pods get addresses in
// PodCIDR on the bridge BridgeName, whose address NodeIP is the node's
// InternalIP and the apiserver's advertise address; Services get ClusterIPs
// in ServiceCIDR, and pods reach the apiserver as in any cluster, at
// KUBERNETES_SERVICE_HOST (KubernetesServiceIP). Every address is loopback
// or in 198.18.0.0/15. Images come from archives (ImportImage,
// BuildGoImage, WriteImageArchive); pods use them with imagePullPolicy:
// Never. There is no cluster DNS.
//
// Start (tests) and Launch (other programs) guarantee, when they return,
// that the Node is Ready without taints, the default ServiceAccount of
// namespace default exists, and the apiserver answers at
// KubernetesServiceIP:443 from the host. Requirements lists what the
// machine must have (root, Debian packages, `make kube-bin`); Start fails
// naming each missing piece and its fix.
//
// Teardown (Close, Start's cleanup, and a failed Start) stops the
// components by PID, kills the pods' processes by cgroup and containerd's
// shims by command line, unmounts everything under the state dir, removes
// the pods' network namespaces, veths and the bridge, the KUBE-* and CNI-*
// iptables chains (and the rules jumping to them, nothing else), the
// cgroup root, what the components wrote outside the state dir, and
// restores the sysctls they changed. A node whose process died without
// teardown is undone by the next Start, from a record in /run. One node
// runs per machine at a time: Start waits for another process's node (a
// flock on /run/mysqlha-realnode.lock, the one file left behind).
//
// Choices that differ from a stock cluster, and why: see the comments of
// containerdConfig, kubeletConfig, kubeProxyConfig and cniConfig.
package realnode
