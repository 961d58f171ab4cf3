package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
	"github.com/handroll/handroll/test/release"
)

// replica is one operator process, as one pod of the Deployment: its own
// webhook port behind the Service, the shared certificate, the one Lease.
type replica struct {
	op      *operator.Operator
	addr    string // its webhook server, an endpoint of the Service
	journal string
}

// startReplica starts bin with the flags both releases take (and extra),
// waits until
// it is ready (caches synced, certificate loaded) and adds it to the
// Service, as the endpoints controller adds a ready pod.
func startReplica(t *testing.T, bin, opNS, certDir string, svc *service, extra ...string) *replica {
	t.Helper()
	port := operator.FreePort(t)
	r := &replica{addr: fmt.Sprintf("127.0.0.1:%d", port), journal: filepath.Join(t.TempDir(), "journal")}
	r.op = operator.LaunchBinary(t, bin, env.Kubeconfig, append([]string{
		fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-cert-dir=" + certDir,
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
		"--reconcile-journal=" + r.journal,
	}, extra...)...)
	r.op.WaitReady(t, time.Minute)
	svc.add(r.addr)
	return r
}

// waitReconciled waits until the replica's journal shows a reconcile of
// every key that ended, and returns when its first reconcile
// began.
func (r *replica) waitReconciled(ctx context.Context, t *testing.T, keys []string) time.Time {
	t.Helper()
	var first time.Time
	var missing []string
	err := budget.Poll(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		entries, err := operator.ReadJournal(r.journal)
		if err != nil {
			return false, nil //nolint:nilerr // not written yet
		}
		done := map[string]bool{}
		first = time.Time{}
		for _, e := range entries {
			if e.Controller != webapp.ControllerName {
				continue
			}
			if e.Event == "start" && first.IsZero() {
				first = e.Time
			}
			// With an error too: "taken"'s reconciles end in its conflict.
			if e.Event == "end" {
				done[e.Key] = true
			}
		}
		missing = missing[:0]
		for _, k := range keys {
			if !done[k] {
				missing = append(missing, k)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("the new process did not reconcile every WebApp: %v; missing %v\n%s", err, missing, r.op.Log())
	}
	return first
}

// sideBySide returns the reconciles of replicas that overlapped in time:
// two leaders at once.
func sideBySide(t *testing.T, replicas ...*replica) []string {
	t.Helper()
	return operator.Overlapping(reconciles(t, replicas...))
}

// reconciles are the replicas' reconciles, from their journals; one cut
// short runs until its process exited (or now, if it still runs).
func reconciles(t *testing.T, replicas ...*replica) []operator.ReconcileInterval {
	t.Helper()
	var intervals []operator.ReconcileInterval
	for _, r := range replicas {
		entries, err := operator.ReadJournal(r.journal)
		if err != nil {
			t.Fatalf("reading %s: %v", r.journal, err)
		}
		exited, ok := r.op.ExitedAt()
		if !ok {
			exited = time.Now()
		}
		intervals = append(intervals, operator.ReconcileIntervals(entries, exited)...)
	}
	return intervals
}

// buildReleases builds the release from and this tree, and returns their
// binaries.
func buildReleases(t *testing.T, from *release.Release) (previousBin, currentBin string) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	previousBin, currentBin = filepath.Join(bins, "handroll-previous"), filepath.Join(bins, "handroll-current")
	release.Build(t, from.Dir, previousBin)
	release.Build(t, root, currentBin)
	return previousBin, currentBin
}

// waitConverged waits until each named WebApp in ns has observed its spec,
// its Deployment has rolled out and every replica is ready; "taken" must
// instead report the name conflict.
func waitConverged(ctx context.Context, t *testing.T, hc versioned.Interface, kube kubernetes.Interface, ns string, names []string) {
	t.Helper()
	var why string
	err := budget.Poll(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			w, err := hc.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if why = converged(w); why != "" {
				return false, nil
			}
			if name == "taken" {
				continue
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				why = name + ": no Deployment"
				return false, nil
			} else if err != nil {
				return false, err
			}
			want := ptr.Deref(d.Spec.Replicas, 1)
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want {
				why = fmt.Sprintf("%s: Deployment %d/%d available", name, d.Status.AvailableReplicas, want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the WebApps in %s did not converge: %v; %s", ns, err, why)
	}
}

// converged says why w has not converged, or "".
func converged(w *handrollv1.WebApp) string {
	ready := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
	switch {
	case w.Status.ObservedGeneration != w.Generation:
		return fmt.Sprintf("%s: generation %d observed %d", w.Name, w.Generation, w.Status.ObservedGeneration)
	case ready == nil:
		return w.Name + ": no Ready condition"
	case w.Name == "taken":
		if ready.Status != metav1.ConditionFalse || ready.Reason != webapp.ReasonResourceConflict {
			return fmt.Sprintf("%s: Ready %s/%s, want False/%s", w.Name, ready.Status, ready.Reason, webapp.ReasonResourceConflict)
		}
	case ready.Status != metav1.ConditionTrue || w.Status.ReadyReplicas != ptr.Deref(w.Spec.Replicas, 1):
		return fmt.Sprintf("%s: Ready %s, %d of %d replicas ready", w.Name, ready.Status, w.Status.ReadyReplicas, ptr.Deref(w.Spec.Replicas, 1))
	}
	return ""
}

// waitQuiet waits until nothing in ns has changed for three seconds: the
// release upgraded from has settled, and the cluster's controllers too.
func waitQuiet(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	versions := func() (map[string]string, error) {
		out := map[string]string{}
		for _, gvr := range []schema.GroupVersionResource{webapps, deployments, replicasets, services, configmaps, pods} {
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, o := range list.Items {
				out[gvr.Resource+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
		return out, nil
	}
	last, err := versions()
	if err != nil {
		t.Fatal(err)
	}
	err = budget.Poll(ctx, 3*time.Second, time.Minute, false, func(context.Context) (bool, error) {
		now, err := versions()
		if err != nil {
			return false, err
		}
		quiet := len(now) == len(last)
		for k, v := range now {
			quiet = quiet && last[k] == v
		}
		last = now
		return quiet, nil
	})
	if err != nil {
		t.Fatalf("%s did not settle under the release upgraded from: %v", ns, err)
	}
}
