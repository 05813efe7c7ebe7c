package kubetest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Controllers are the kube-controller-manager controllers that
// StartControllerManager runs: EndpointSlices for Services, and the default
// ServiceAccount (plus legacy token Secrets) of every namespace. Nothing else:
// no node lifecycle, no garbage collector, no cloud.
var Controllers = []string{
	"endpointslice-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
}

// ControllerManagerOption configures StartControllerManager and
// LaunchControllerManager.
type ControllerManagerOption func(*cmOptions)

type cmOptions struct {
	controllers []string
	extraArgs   []string
}

// WithControllers runs these controllers (kube-controller-manager
// --controllers names, e.g. "statefulset-controller") instead of Controllers.
// The readiness check needs "serviceaccount-controller" among them.
func WithControllers(names ...string) ControllerManagerOption {
	return func(o *cmOptions) { o.controllers = append([]string(nil), names...) }
}

// WithControllerManagerArgs appends args to the kube-controller-manager
// command line, e.g. "--node-monitor-period=1s". Only for flags the package
// does not set.
func WithControllerManagerArgs(args ...string) ControllerManagerOption {
	return func(o *cmOptions) { o.extraArgs = append(o.extraArgs, args...) }
}

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	proc *process
}

// StartControllerManager runs kube-controller-manager with Controllers
// against s, as the admin user (--use-service-account-credentials=false), and
// waits until the serviceaccount controller has created default/default, which
// shows that the controllers are running. It is killed by tb.Cleanup (before
// the apiserver) and dies with the test binary.
//
// EndpointSlices only list Pods that have spec.nodeName, a pod IP that is not
// loopback and a Ready condition (set through the pods/status subresource);
// no kubelet runs here, so tests set all that themselves (ReportPodReady).
func (s *APIServer) StartControllerManager(tb testing.TB, opts ...ControllerManagerOption) *ControllerManager {
	tb.Helper()
	cm, err := s.LaunchControllerManager(opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	// Killed, not stopped gracefully, at cleanup: its state is thrown away.
	tb.Cleanup(cm.Kill)
	return cm
}

// LaunchControllerManager is StartControllerManager for programs without a
// testing.TB: the caller stops the controller manager (Stop or Kill) before
// closing s. It runs from the directory of s's kube-apiserver (WithBinDir),
// with its kubeconfig and log in s.Dir().
func (s *APIServer) LaunchControllerManager(opts ...ControllerManagerOption) (*ControllerManager, error) {
	o := cmOptions{controllers: Controllers}
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := binary(s.binDir, "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(s.dir, "controller-manager.kubeconfig")
	if err := s.SaveKubeconfig(kubeconfig, ""); err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(o.controllers, ","),
		"--service-account-private-key-file=" + s.saKeyFile,
		"--root-ca-file=" + filepath.Join(s.dir, "ca.crt"),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		// No HTTPS endpoint (healthz, metrics): nothing here uses it, and it
		// would need a port and delegated authentication.
		"--secure-port=0",
	}
	args = append(args, o.extraArgs...)
	logFile := filepath.Join(s.dir, "kube-controller-manager.log")
	p, err := launchProcess("kube-controller-manager", bin, s.dir, logFile, args, func(ctx context.Context) error {
		_, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errors.New("ServiceAccount default/default not created yet")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	return &ControllerManager{proc: p}, nil
}

// ReportPodReady plays the kubelet, which does not run here: it reports pod
// (created with spec.nodeName) Running and Ready with podIP and hostIP
// through the pods/status subresource, which is what an EndpointSlice needs
// to list it. podIP is only data; it must not be loopback.
func ReportPodReady(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, podIP, hostIP string) error {
	now := metav1.Now()
	pod = pod.DeepCopy()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}, HostIP: hostIP,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubetest: reporting pod %s/%s ready: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// LogFile returns the path of the controller manager's stdout and stderr.
func (cm *ControllerManager) LogFile() string { return cm.proc.logFile }

// Pid returns the controller manager's process id.
func (cm *ControllerManager) Pid() int { return cm.proc.pid() }

// Stop terminates the controller manager (SIGTERM, SIGKILL after 10 s) and
// waits for it. Stop and Kill are idempotent; only the first call of either
// acts.
func (cm *ControllerManager) Stop() { cm.proc.stop() }

// Kill stops the controller manager at once with SIGKILL and waits for it;
// tb.Cleanup does this for StartControllerManager.
func (cm *ControllerManager) Kill() { cm.proc.killOnce() }
