package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	logFile  string
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// StartControllerManager runs kube-controller-manager with Controllers
// against s, as the admin user (--use-service-account-credentials=false), and
// waits until the serviceaccount controller has created default/default, which
// shows that the controllers are running. It is killed by tb.Cleanup (before
// the apiserver) and dies with the test binary.
//
// EndpointSlices only list Pods that have spec.nodeName, a pod IP that is not
// loopback and a Ready condition (set through the pods/status subresource);
// no kubelet runs here, so tests set all that themselves.
func (s *APIServer) StartControllerManager(tb testing.TB) *ControllerManager {
	tb.Helper()
	bin, _ := binary(tb, "kube-controller-manager")
	kubeconfig := filepath.Join(s.dir, "controller-manager.kubeconfig")
	if err := s.writeKubeconfig(kubeconfig, AdminUser, s.adminToken); err != nil {
		tb.Fatalf("kubetest: writing %s: %v", kubeconfig, err)
	}
	cm := &ControllerManager{logFile: filepath.Join(s.dir, "kube-controller-manager.log"), exited: make(chan struct{})}
	logf, err := os.Create(cm.logFile)
	if err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	defer logf.Close()

	cm.cmd = exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(Controllers, ","),
		"--service-account-private-key-file="+s.saKeyFile,
		"--root-ca-file="+filepath.Join(s.dir, "ca.crt"),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		// No HTTPS endpoint (healthz, metrics): nothing here uses it, and it
		// would need a port and delegated authentication.
		"--secure-port=0",
	)
	cm.cmd.Stdout, cm.cmd.Stderr = logf, logf
	cm.cmd.Dir = s.dir
	cm.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cm.cmd.Start(); err != nil {
		tb.Fatalf("kubetest: starting %s: %v", bin, err)
	}
	go func() {
		_ = cm.cmd.Wait()
		close(cm.exited)
	}()

	if err := cm.waitReady(s); err != nil {
		cm.kill()
		tb.Fatalf("kubetest: kube-controller-manager did not start after %v: %v\n--- last lines of %s:\n%s",
			time.Since(began).Round(time.Millisecond), err, cm.logFile, tail(cm.logFile, 40))
	}
	// Killed, not stopped gracefully, at cleanup: its state is thrown away.
	tb.Cleanup(func() { cm.stopOnce.Do(cm.kill) })
	return cm
}

func (cm *ControllerManager) waitReady(s *APIServer) error {
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(readyTimeout)
	lastErr := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		select {
		case <-cm.exited:
			return errors.New("process exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		cancel()
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			lastErr = err
		} else {
			lastErr = fmt.Errorf("ServiceAccount default/default not created yet")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %v: %w", readyTimeout, lastErr)
}

// LogFile returns the path of the controller manager's stdout and stderr.
func (cm *ControllerManager) LogFile() string { return cm.logFile }

func (cm *ControllerManager) kill() {
	_ = syscall.Kill(-cm.cmd.Process.Pid, syscall.SIGKILL)
	<-cm.exited
}

// Stop terminates the controller manager (SIGTERM, SIGKILL after 10 s) and
// waits for it. It is idempotent and also run by tb.Cleanup.
func (cm *ControllerManager) Stop() {
	cm.stopOnce.Do(func() {
		_ = syscall.Kill(-cm.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-cm.exited:
		case <-time.After(stopGrace):
			cm.kill()
		}
	})
}
