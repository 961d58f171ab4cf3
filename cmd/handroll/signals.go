package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// signalContext returns a context cancelled by the first SIGINT or SIGTERM.
// A second signal exits the process at once, for an operator that does not
// want to wait for the graceful stop.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		klog.InfoS("Received a signal; stopping gracefully (send it again to exit at once)", "signal", sig.String())
		cancel()
		sig = <-ch
		klog.InfoS("Received a second signal; exiting now", "signal", sig.String())
		klog.Flush()
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
