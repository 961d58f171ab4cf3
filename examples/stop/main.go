// Command stop is handroll's side of hack/compare/examples/stop: the stop of
// a leader whose reconcile ignores its context, with pkg/leader and
// pkg/controller as cmd/handroll uses them. One controller reconciles the
// ConfigMaps of --namespace, two workers, on a Lease released on a graceful
// stop. Its reconcile of the ConfigMap "polite" waits until its context
// ends; that of "deaf" goes on for --deaf-for whatever its context says,
// every --tick saying so with the Lease's holder as it reads it then.
//
// Create both ConfigMaps, start two with different --id values, then
// SIGTERM the leader. Watch for, on the leader:
//
//   - nothing for --shutdown-timeout: both reconciles keep a live context
//     while the controller drains, so that their writes complete;
//   - then "polite: context cancelled", as Start cancels what is left;
//   - "Run returned: ... still running": deaf did not return within a
//     second of its cancellation, so the controller's error wraps
//     controller.ErrStillRunning, which this program passes on as
//     leader.ErrWorkStillRunning. The elector then keeps the Lease instead
//     of releasing it, and the program exits at once, non-zero.
//
// The other replica leads only once the kept Lease has expired, a lease
// duration after its last renewal, when the leader (and deaf with it) is
// gone. Had deaf returned when cancelled, the Lease would have been
// released and the standby would lead within a retry period.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/leader"
)

var id = flag.String("id", "", "This replica's name, written into the Lease when it leads and printed on every line (required).")

// say prints one line: the time, this replica's name, the message.
func say(format string, args ...any) {
	fmt.Printf("%s %s: %s\n", time.Now().Format("15:04:05.000"), *id, fmt.Sprintf(format, args...))
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; empty: in-cluster.")
	namespace := flag.String("namespace", "default", "Namespace of the Lease and of the ConfigMaps reconciled.")
	lease := flag.String("lease", "stop-example", "Name of the Lease.")
	leaseDuration := flag.Duration("lease-duration", 4*time.Second, "How long a standby waits after the last renewal before it takes an unreleased Lease.")
	renewDeadline := flag.Duration("renew-deadline", 2*time.Second, "How long the leader keeps failing to renew before it gives up leading.")
	retryPeriod := flag.Duration("retry-period", 500*time.Millisecond, "How often replicas try to acquire or renew the Lease.")
	shutdownTimeout := flag.Duration("shutdown-timeout", 2*time.Second, "How long the controller waits, once stopped, for the reconciles in flight (controller.Options.ShutdownTimeout).")
	deafFor := flag.Duration("deaf-for", 6*time.Second, "How long deaf goes on after its context ended.")
	tick := flag.Duration("tick", 500*time.Millisecond, "How often deaf says it is still running.")
	flag.Parse()
	if *id == "" {
		fmt.Fprintln(os.Stderr, "--id is required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)

	opts := leader.DefaultOptions() // ReleaseOnCancel among them
	opts.LeaseName, opts.LeaseNamespace, opts.Identity = *lease, *namespace, *id
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = *leaseDuration, *renewDeadline, *retryPeriod
	elector, err := leader.New(cfg, opts, nil)
	check(err)

	holder := func() string {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := client.CoordinationV1().Leases(*namespace).Get(c, *lease, metav1.GetOptions{})
		switch {
		case err != nil:
			return "unknown (" + err.Error() + ")"
		case l.Spec.HolderIdentity == nil:
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	reconcile := func(ctx context.Context, req controller.Request) (controller.Result, error) {
		switch req.Name {
		case "polite":
			say("polite: reconciling until cancelled")
			<-ctx.Done()
			say("polite: context cancelled")
			return controller.Result{}, ctx.Err()
		case "deaf":
			say("deaf: reconciling, deaf to its context")
			<-ctx.Done()
			say("deaf: context cancelled, carrying on for %s", *deafFor)
			t := time.NewTicker(*tick)
			defer t.Stop()
			for end := time.Now().Add(*deafFor); time.Now().Before(end); <-t.C {
				say("deaf: still running, Lease holder %q", holder())
			}
			say("deaf: stopped")
		}
		return controller.Result{}, nil
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(*namespace))
	configMaps := factory.Core().V1().ConfigMaps().Informer()
	c, err := controller.New(controller.Options{Name: "stop-example", MaxConcurrentReconciles: 2, ShutdownTimeout: *shutdownTimeout},
		controller.ReconcilerFunc(reconcile))
	check(err)
	check(c.Watch(configMaps, controller.EnqueueObject()))
	factory.Start(ctx.Done())

	say("pid %d, candidate for Lease %s/%s", os.Getpid(), *namespace, *lease)
	err = elector.Run(ctx, func(leading context.Context) error {
		say("elected: this replica holds the Lease %s/%s", *namespace, *lease)
		err := c.Start(leading, configMaps.HasSynced)
		if errors.Is(err, controller.ErrStillRunning) {
			// Passed on, so that the elector keeps the Lease: deaf may still
			// write, and no standby may lead until this process is gone.
			return fmt.Errorf("%w: %w", leader.ErrWorkStillRunning, err)
		}
		return err
	})
	stop()
	say("Run returned: %v", err)
	if err != nil {
		os.Exit(1) // at once: what is still running goes with the process
	}
	say("exiting")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
