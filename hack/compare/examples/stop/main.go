// Command stop shows a controller-runtime Manager's stop when a runnable
// ignores its context: the order in which the groups stop, the grace period
// running out, and what is left running once Start has returned. It adds
// three runnables to a Manager that leads on a Lease, with
// LeaderElectionReleaseOnCancel and a short GracefulShutdownTimeout:
//
//   - "every-replica": NeedLeaderElection false, so in the Others group; it
//     returns when its context ends.
//   - "polite": leader-only (the LeaderElection group); it returns when its
//     context ends.
//   - "deaf": leader-only; when its context ends it goes on for --deaf-for,
//     as a reconcile stuck in a write it never cancels would, and every
//     --tick says so with the Lease's holder as it reads it then.
//
// Start two with different --id values, then SIGTERM the leader. Watch for:
// "every-replica: stopped" before "polite: stopped" (Others stop before
// LeaderElection); the Manager's "failed waiting for all runnables to end
// within grace period" once --grace has passed; "Start returned"; then
// "deaf: still running" with an empty holder, or the other replica's, which
// prints "elected" meanwhile: the Lease was released while deaf runs. This
// program then waits for deaf to end before it exits, to show that; the
// Manager's documentation asks the caller to exit at once instead.
//
// handroll's counterpart is examples/stop in the main module.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// everyReplica is a RunnableFunc that does not need the Lease.
type everyReplica struct{ manager.RunnableFunc }

func (everyReplica) NeedLeaderElection() bool { return false }

var id = flag.String("id", "", "This replica's name, printed on every line (required).")

// say prints one line: the time, this replica's name, the message.
func say(format string, args ...any) {
	fmt.Printf("%s %s: %s\n", time.Now().Format("15:04:05.000"), *id, fmt.Sprintf(format, args...))
}

func main() {
	namespace := flag.String("namespace", "default", "Namespace of the Lease.")
	lease := flag.String("lease", "stop-example", "Name of the Lease.")
	leaseDuration := flag.Duration("lease-duration", 4*time.Second, "How long a standby waits after the last renewal before it takes an unreleased Lease.")
	renewDeadline := flag.Duration("renew-deadline", 2*time.Second, "How long the leader keeps failing to renew before it gives up leading.")
	retryPeriod := flag.Duration("retry-period", 500*time.Millisecond, "How often replicas try to acquire or renew the Lease.")
	grace := flag.Duration("grace", 2*time.Second, "The Manager's GracefulShutdownTimeout.")
	deafFor := flag.Duration("deaf-for", 6*time.Second, "How long deaf goes on after its context ended.")
	tick := flag.Duration("tick", 500*time.Millisecond, "How often deaf says it is still running.")
	flag.Parse()
	if *id == "" {
		fmt.Fprintln(os.Stderr, "--id is required")
		os.Exit(2)
	}
	// The Manager's own log lines (the stop's steps among them) go to stderr.
	ctrl.SetLogger(klog.Background())

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              *lease,
		LeaderElectionNamespace:       *namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 leaseDuration,
		RenewDeadline:                 renewDeadline,
		RetryPeriod:                   retryPeriod,
		GracefulShutdownTimeout:       grace,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
	})
	check(err)

	reader := mgr.GetAPIReader()
	holder := func() string {
		var l coordinationv1.Lease
		// A context of its own: deaf's has ended.
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := reader.Get(c, client.ObjectKey{Namespace: *namespace, Name: *lease}, &l); err != nil {
			return "unknown (" + err.Error() + ")"
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	deafDone := make(chan struct{})
	check(mgr.Add(everyReplica{func(ctx context.Context) error {
		go func() {
			select {
			case <-mgr.Elected():
				// The Manager names its identity (hostname_uuid) nowhere
				// else: the Lease holds it.
				say("elected: this replica holds the Lease %s/%s as %q", *namespace, *lease, holder())
			case <-ctx.Done():
			}
		}()
		return polite(ctx, "every-replica")
	}}))
	check(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return polite(ctx, "polite")
	})))
	check(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		defer close(deafDone)
		say("deaf: started")
		<-ctx.Done()
		say("deaf: context cancelled, carrying on for %s", *deafFor)
		t := time.NewTicker(*tick)
		defer t.Stop()
		for end := time.Now().Add(*deafFor); time.Now().Before(end); <-t.C {
			say("deaf: still running, Lease holder %q", holder())
		}
		say("deaf: stopped")
		return nil
	})))

	say("pid %d, starting the Manager", os.Getpid())
	err = mgr.Start(ctrl.SetupSignalHandler())
	say("Start returned: %v", err)
	select {
	case <-mgr.Elected():
		// This replica led, so deaf ran: a real program would exit now.
		// Staying shows what is left running.
		<-deafDone
	default:
	}
	say("exiting")
}

// polite is a runnable that says when it starts and returns when its
// context ends.
func polite(ctx context.Context, name string) error {
	say("%s: started", name)
	<-ctx.Done()
	say("%s: stopped", name)
	return nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
