// Command runnable shows which of a controller-runtime Manager's runnables
// wait for leader election. It adds two to one Manager that elects a leader
// on a Lease:
//
//   - "leader-only": a plain manager.RunnableFunc. It has no
//     NeedLeaderElection method, and the Manager treats such a runnable as
//     needing the Lease (runnables.Add in pkg/manager/runnable_group.go puts
//     it in the LeaderElection group, which internal.go starts from
//     OnStartedLeading).
//   - "every-replica": the same function, wrapped in a type whose
//     NeedLeaderElection returns false; the Manager starts it on every
//     replica, once the caches have synced, leader or not.
//
// Start two with different --id values. Watch for: "every-replica: started"
// from both, "leader-only: started" from one only; stop that one with
// SIGTERM and the other prints "elected" and "leader-only: started".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// everyReplica is a RunnableFunc that does not need the Lease. Embedding
// gives it the func's Start method; the Manager looks for the other one.
type everyReplica struct{ manager.RunnableFunc }

func (everyReplica) NeedLeaderElection() bool { return false }

var id = flag.String("id", "", "This replica's name, printed on every line (required).")

// say prints one line: the time, this replica's name, the message.
func say(format string, args ...any) {
	fmt.Printf("%s %s: %s\n", time.Now().Format("15:04:05.000"), *id, fmt.Sprintf(format, args...))
}

func main() {
	namespace := flag.String("namespace", "default", "Namespace of the Lease.")
	lease := flag.String("lease", "runnable-example", "Name of the Lease.")
	leaseDuration := flag.Duration("lease-duration", 4*time.Second, "How long a standby waits after the last renewal before it takes an unreleased Lease.")
	renewDeadline := flag.Duration("renew-deadline", 2*time.Second, "How long the leader keeps failing to renew before it gives up leading.")
	retryPeriod := flag.Duration("retry-period", 500*time.Millisecond, "How often replicas try to acquire or renew the Lease.")
	tick := flag.Duration("tick", 2*time.Second, "How often a running runnable says so.")
	// --kubeconfig is controller-runtime's own flag, registered on the
	// default FlagSet when its config package loads; ctrl.GetConfig reads it.
	flag.Parse()
	if *id == "" {
		fmt.Fprintln(os.Stderr, "--id is required")
		os.Exit(2)
	}
	// The Manager's own log lines (the election among them) go to stderr.
	ctrl.SetLogger(klog.Background())

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElection:          true,
		LeaderElectionID:        *lease,
		LeaderElectionNamespace: *namespace,
		// On a graceful stop the Manager stops the leader-only runnables
		// first, then empties the Lease, so a standby need not wait a lease
		// duration.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 leaseDuration,
		RenewDeadline:                 renewDeadline,
		RetryPeriod:                   retryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: "0"}, // no metrics server
	})
	check(err)

	check(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return run(ctx, "leader-only", *tick)
	})))
	check(mgr.Add(everyReplica{func(ctx context.Context) error {
		// Elected is closed once this replica holds the Lease (and the
		// leader-only runnables are being started).
		go func() {
			select {
			case <-mgr.Elected():
				say("elected: this replica holds the Lease %s/%s", *namespace, *lease)
			case <-ctx.Done():
			}
		}()
		return run(ctx, "every-replica", *tick)
	}}))

	say("pid %d, starting the Manager", os.Getpid())
	// SetupSignalHandler's context ends on SIGTERM or Ctrl-C; a second
	// signal exits at once.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		// "leader election lost": another replica may be leading already,
		// so exit without waiting for anything.
		say("manager stopped: %v", err)
		os.Exit(1)
	}
	say("exiting")
}

// run is both runnables' body: it says when it starts, every tick while it
// runs, and when its context ends.
func run(ctx context.Context, name string, tick time.Duration) error {
	say("%s: started", name)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			say("%s: stopped", name)
			return nil
		case <-t.C:
			say("%s: running", name)
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
