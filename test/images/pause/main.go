// Command pause is the sandbox ("pause") image of the local node's container
// runtime: the process that holds a pod's namespaces while its containers
// come and go. It does nothing but wait: SIGTERM or SIGINT ends it with exit
// code 0, and as the pod's PID 1 it reaps every child that is handed to it
// (on SIGCHLD), so that no zombie outlives its container.
//
// `make image-pause` builds it into the image localhost/handroll-pause:1,
// on an empty base like the operator's own image (hack/image).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	reap() // children that ended before Notify took effect
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: %v: exiting\n", sig)
		os.Exit(0)
	}
}

// reap collects every child that has exited. Signals coalesce, so one
// SIGCHLD may stand for several children: wait until none is left.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
