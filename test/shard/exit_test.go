package shard

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// TestShardedReplicaExitsNonZeroOnALostRangeLease: a sharded replica whose
// range Lease another holder takes exits at once and non-zero, as the
// single leader does on its own Lease, so that Kubernetes counts the
// restart; the last line it logs says why.
func TestShardedReplicaExitsNonZeroOnALostRangeLease(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ctx := context.Background()
	kube := env.KubeClient(t)
	opNS := env.Namespace(t)
	kubeconfig := env.WriteKubeconfig(t, func(*clientcmdapi.Config) {})
	o := operator.Start(t, kubeconfig, "--shards=2",
		"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms")
	waitUntil(t, 90*time.Second, "the replica holds both ranges", func() (bool, string) {
		f := o.Metrics(t)["handroll_shard_ranges_held"]
		if f == nil || len(f.GetMetric()) == 0 {
			return false, "no handroll_shard_ranges_held"
		}
		v := f.GetMetric()[0].GetGauge().GetValue()
		return v == 2, fmt.Sprintf("it holds %v", v)
	}, func() string { return o.Log() })

	// Another holder, renewing now: the replica's renewals fail until its
	// renew deadline, and it must stop writing.
	name := shard.RangeLease(leader.DefaultLeaseName, shard.Range{Index: 1, Count: 2})
	taken := time.Now()
	waitUntil(t, 30*time.Second, "the range Lease overwritten", func() (bool, string) {
		l, err := kube.CoordinationV1().Leases(opNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		thief := "another-replica"
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &thief, &now, &now
		if _, err := kube.CoordinationV1().Leases(opNS).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return false, err.Error() // a renewal came in between
		}
		return true, ""
	}, func() string { return "" })

	select {
	case <-o.Exited():
	case <-time.After(budget.Scale(60 * time.Second)):
		t.Fatalf("the replica still runs %s after its range Lease was taken\n%s", time.Since(taken).Round(time.Second), o.Log())
	}
	// Signal 0 sends nothing: Stop only returns how the process exited.
	err := o.Stop(t, syscall.Signal(0), time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("the replica exited with %v, want a non-zero exit code", err)
	}
	lines := strings.Split(strings.TrimSpace(o.Log()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "leader election lost") || !strings.Contains(last, name) {
		t.Errorf("the last log line is\n%s\nwant the lost Lease %s as the reason", last, name)
	}
	t.Logf("exited %s after the Lease was taken, code %d: %s", time.Since(taken).Round(100*time.Millisecond), exit.ExitCode(), last)
}

// TestCoordinatorReportsWhatTheStopLeftBehind: a coordinator stopped while
// a range's work is still running at its drain deadline, or while a range
// Lease is lost as its work drains, returns that error, not nil: the
// process must exit non-zero and at once (the kept Lease expires).
func TestCoordinatorReportsWhatTheStopLeftBehind(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	client := env.KubeClient(t)
	opts := leader.DefaultOptions()
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 2*time.Second, 300*time.Millisecond
	for _, tc := range []struct {
		name string
		// drain is the range's work once its context ends.
		drain func(ns string, r shard.Range) error
		want  error
	}{
		{"work still running", func(string, shard.Range) error {
			return fmt.Errorf("%w: a reconcile outlived the drain", leader.ErrWorkStillRunning)
		}, leader.ErrWorkStillRunning},
		{"lease lost while draining", func(ns string, r shard.Range) error {
			if r.Index != 0 {
				return nil
			}
			leases := client.CoordinationV1().Leases(ns)
			name := shard.RangeLease("handroll-leader", r)
			for {
				l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
				if err == nil {
					thief, now := "another-replica", metav1.NewMicroTime(time.Now())
					l.Spec.HolderIdentity, l.Spec.RenewTime = &thief, &now
					if _, err = leases.Update(context.Background(), l, metav1.UpdateOptions{}); err == nil {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(2 * opts.LeaseDuration) // draining past the renew deadline
			return nil
		}, leader.ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			o := opts
			o.LeaseNamespace = ns
			held := make(chan shard.Range, 2)
			c := newCoordinator(client, ns, "replica-a", 2, o, func(ctx context.Context, r shard.Range) error {
				held <- r
				<-ctx.Done()
				return tc.drain(ns, r)
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			for range 2 {
				select {
				case <-held:
				case err := <-done:
					cancel()
					t.Fatalf("Run returned before it held both ranges: %v", err)
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, tc.want) {
				t.Errorf("Run returned %v, want %v", err, tc.want)
			}
		})
	}
}
