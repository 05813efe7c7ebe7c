// Command pause is the sandbox ("infra") container of the realnode test
// node: PID 1 of every pod, holding the pod's namespaces while its
// containers come and go. It reaps orphaned children (a pod with
// shareProcessNamespace: true leaves them to it) and exits on SIGTERM or
// SIGINT. It is built with CGO_ENABLED=0 into a one-file image by package
// realnode, which embeds this source.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Signals coalesce: one SIGCHLD may stand for many exited children.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
