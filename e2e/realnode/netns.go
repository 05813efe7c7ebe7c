package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodNetns returns the path (/var/run/netns/cni-...) of the network
// namespace of a running pod's sandbox, for fault injection from the host:
// `nsenter --net=PATH iptables ...`, `ip netns exec NAME tc ...`. It finds
// the pod's processes in its cgroup (.../pod<uid>/...) under the node's
// cgroup root and the named namespace they are in. A hostNetwork pod has
// none: that is an error.
func (n *Node) PodNetns(ctx context.Context, namespace, pod string) (string, error) {
	p, err := n.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("realnode: netns of pod %s/%s: %w", namespace, pod, err)
	}
	if p.Spec.HostNetwork {
		return "", fmt.Errorf("realnode: pod %s/%s uses the host network", namespace, pod)
	}
	byIno := netnsInodes()
	// cgroupfs driver: <root>/kubepods[/<qos>]/pod<uid>/<container id>;
	// the uid keeps its dashes.
	podDir := "pod" + string(p.UID)
	for _, d := range cgroupDirs() {
		if !strings.Contains(d, "/"+podDir+"/") && filepath.Base(d) != podDir {
			continue
		}
		for _, pid := range pidsIn(d) {
			if ino, ok := netnsOfPID(pid); ok {
				if name, ok := byIno[ino]; ok {
					return filepath.Join("/var/run/netns", name), nil
				}
			}
		}
	}
	return "", fmt.Errorf("realnode: pod %s/%s (uid %s) has no running process in a named network namespace", namespace, pod, p.UID)
}

// ContainerPID returns the host PID of the main process of a running
// container of a pod (the one the runtime started, whose parent is outside
// the container), for signals from the host: kill -9, SIGSTOP.
func (n *Node) ContainerPID(ctx context.Context, namespace, pod, container string) (int, error) {
	p, err := n.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("realnode: pid of %s/%s/%s: %w", namespace, pod, container, err)
	}
	return ContainerPIDOf(p, container)
}

// ContainerPIDOf is ContainerPID for a pod object already at hand (from an
// informer's cache, say, while the API server is down).
func ContainerPIDOf(p *corev1.Pod, container string) (int, error) {
	namespace, pod := p.Namespace, p.Name
	var id string
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == container && st.State.Running != nil {
			id = st.ContainerID[strings.Index(st.ContainerID, "://")+3:]
		}
	}
	if id == "" {
		return 0, fmt.Errorf("realnode: container %s of pod %s/%s is not running", container, namespace, pod)
	}
	for _, d := range cgroupDirs() {
		if filepath.Base(d) != id {
			continue
		}
		pids := pidsIn(d)
		in := map[int]bool{}
		for _, pid := range pids {
			in[pid] = true
		}
		for _, pid := range pids {
			if !in[parentPID(pid)] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("realnode: container %s (%s) of pod %s/%s has no process in the node's cgroups", container, id, namespace, pod)
}

// PodPIDs returns the host PIDs of every process of a pod, its sandbox's
// pause process included: killing them all is what a crash of the pod's
// processes looks like to the kubelet.
func (n *Node) PodPIDs(ctx context.Context, namespace, pod string) ([]int, error) {
	p, err := n.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("realnode: processes of %s/%s: %w", namespace, pod, err)
	}
	podDir := "pod" + string(p.UID)
	var out []int
	seen := map[int]bool{}
	for _, d := range cgroupDirs() {
		if !strings.Contains(d+"/", "/"+podDir+"/") {
			continue
		}
		for _, pid := range pidsIn(d) {
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("realnode: pod %s/%s (uid %s) has no process in the node's cgroups", namespace, pod, p.UID)
	}
	return out, nil
}

func pidsIn(cgroupDir string) []int {
	data, _ := os.ReadFile(filepath.Join(cgroupDir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// parentPID reads the PPid line of /proc/pid/status; 0 if unknown.
func parentPID(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}
