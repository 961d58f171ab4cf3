// Command leader-election runs one candidate of a leader election on a
// coordination.k8s.io Lease with client-go's LeaderElector. Start two with
// different --id values: one prints "leading", the other "standby: leader
// is ...". Stop the leader and watch how soon the standby takes over:
//
//   - SIGTERM or Ctrl-C: the leader empties the Lease on its way out
//     (ReleaseOnCancel), and the standby takes it within a retry period.
//   - SIGKILL: nobody releases the Lease; the standby waits until a lease
//     duration has passed since the last renewal it saw.
//
// Every line starts with the time, and a standby prints how long ago the
// Lease was renewed, so the two cases can be told apart.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var id = flag.String("id", "", "This candidate's identity, written into the Lease when it leads (required).")

// say prints one line: the time, this candidate's identity, the message.
func say(format string, args ...any) {
	fmt.Printf("%s %s: %s\n", time.Now().Format("15:04:05.000"), *id, fmt.Sprintf(format, args...))
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; empty: in-cluster.")
	namespace := flag.String("namespace", "default", "Namespace of the Lease.")
	lease := flag.String("lease", "leader-election-example", "Name of the Lease.")
	leaseDuration := flag.Duration("lease-duration", 4*time.Second, "How long a standby waits after the last renewal before it takes an unreleased Lease.")
	renewDeadline := flag.Duration("renew-deadline", 2*time.Second, "How long the leader keeps failing to renew before it gives up leading.")
	retryPeriod := flag.Duration("retry-period", 500*time.Millisecond, "How often candidates try to acquire or renew the Lease.")
	flag.Parse()
	if *id == "" {
		fmt.Fprintln(os.Stderr, "--id is required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)

	var leading atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *lease},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: *id},
		},
		LeaseDuration: *leaseDuration,
		RenewDeadline: *renewDeadline,
		RetryPeriod:   *retryPeriod,
		// Run empties the Lease when ctx ends. It does so without waiting
		// for OnStartedLeading to return, so work guarded by the Lease must
		// have stopped by then (this example's work is printing). handroll's
		// pkg/leader stops the work first, then releases.
		ReleaseOnCancel: true,
		Name:            *lease,
		Callbacks: leaderelection.LeaderCallbacks{
			// OnStartedLeading runs in its own goroutine; its ctx ends when
			// leadership does. A controller would start its workers here.
			OnStartedLeading: func(context.Context) {
				leading.Store(true)
				say("leading (Lease %s/%s)", *namespace, *lease)
			},
			// Run calls OnStoppedLeading whenever it returns, leader or not.
			OnStoppedLeading: func() {
				if leading.Load() {
					say("stopped leading")
				}
			},
			OnNewLeader: func(holder string) {
				if holder != *id {
					say("standby: leader is %s", holder)
				}
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go report(ctx, client, *namespace, *lease, &leading)

	say("pid %d, candidate for Lease %s/%s: lease %s, renew deadline %s, retry %s", os.Getpid(), *namespace, *lease, *leaseDuration, *renewDeadline, *retryPeriod)
	// Run blocks: it tries to acquire the Lease every retry period, then
	// renews it until ctx ends or a renewal fails for the renew deadline.
	elector.Run(ctx)
	signalled := ctx.Err() != nil
	stop()
	if !signalled {
		// Leadership lost without a signal (say, the API server was out of
		// reach): exit at once, as another candidate may be leading now.
		say("lost the Lease: exiting")
		os.Exit(1)
	}
	say("exiting")
}

// report prints, once a second while this candidate does not lead, who
// holds the Lease and how long ago it was renewed. The elector itself never
// compares renewTime with its own clock: it counts the lease duration from
// when it last saw the Lease change, so clock skew does not matter to it.
func report(ctx context.Context, client kubernetes.Interface, namespace, name string, leading *atomic.Bool) {
	for ; ctx.Err() == nil && !leading.Load(); time.Sleep(time.Second) {
		l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
			continue
		}
		switch holder := *l.Spec.HolderIdentity; holder {
		case "":
			say("standby: the Lease was released; taking it at the next retry")
		case *id:
		default:
			say("standby: %s renewed the Lease %.1fs ago", holder, time.Since(l.Spec.RenewTime.Time).Seconds())
		}
	}
}
