package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if ino, ok := netnsOfPID(pid); ok {
				if name, ok := byIno[ino]; ok {
					return filepath.Join("/var/run/netns", name), nil
				}
			}
		}
	}
	return "", fmt.Errorf("realnode: pod %s/%s (uid %s) has no running process in a named network namespace", namespace, pod, p.UID)
}
