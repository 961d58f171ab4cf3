package pitfalls

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestStopGivesUpOnARunnableThatIgnoresItsContext: a Runnable that does not
// return when its context ends holds mgr.Start for GracefulShutdownTimeout;
// then Start returns the grace-period error, and the Runnable's goroutine
// is left running.
func TestStopGivesUpOnARunnableThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	mgr := newManager(t, config(t), manager.Options{GracefulShutdownTimeout: ptr.To(grace)})
	started, returned, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	if err := mgr.Add(manager.RunnableFunc(func(context.Context) error {
		close(started)
		<-release // not ctx.Done()
		close(returned)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		within(t, waitLimit, returned, "the runnable returns once released")
	}()
	run := start(t, mgr)
	within(t, waitLimit, started, "the runnable starts")

	stopped := time.Now()
	run.cancel()
	within(t, grace+10*time.Second, run.done, "mgr.Start returns after the grace period")
	took := time.Since(stopped)
	if took < grace {
		t.Errorf("mgr.Start returned %s after the stop, before the grace period of %s", took, grace)
	}
	want := "failed waiting for all runnables to end within grace period of 2s"
	if run.err == nil || !strings.Contains(run.err.Error(), want) || !errors.Is(run.err, context.DeadlineExceeded) {
		t.Errorf("mgr.Start returned %v; want an error saying %q that wraps context.DeadlineExceeded", run.err, want)
	}
	if closed(returned) {
		t.Error("the runnable returned: nothing shows its goroutine outliving mgr.Start")
	}
	t.Logf("mgr.Start returned %s after the stop: %v", took.Round(time.Millisecond), run.err)
}

// TestPlainRunnableRunsOnlyOnTheLeader: a Runnable that does not implement
// LeaderElectionRunnable goes to the LeaderElection group, so a replica that
// is not the leader never starts it; one whose NeedLeaderElection is false
// starts at once. Once the Lease is free the replica leads and starts the
// plain one too.
func TestPlainRunnableRunsOnlyOnTheLeader(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	ns := env.Namespace(t)
	kube := env.KubeClient(t)
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	lease, err := kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "pitfalls", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("someone-else"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	mgr := newManager(t, cfg, manager.Options{
		LeaderElection:          true,
		LeaderElectionID:        "pitfalls",
		LeaderElectionNamespace: ns,
		LeaseDuration:           ptr.To(4 * time.Second),
		RenewDeadline:           ptr.To(2 * time.Second),
		RetryPeriod:             ptr.To(500 * time.Millisecond),
	})
	plain, everywhere := make(chan struct{}), make(chan struct{})
	runs := func(started chan struct{}) manager.RunnableFunc {
		return func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		}
	}
	if err := mgr.Add(runs(plain)); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(everyReplica{runs(everywhere)}); err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	within(t, waitLimit, everywhere, "the runnable with NeedLeaderElection false starts")
	select {
	case <-plain:
		t.Fatal("the plain runnable started while another identity held the Lease")
	case <-time.After(3 * time.Second):
	}
	if closed(mgr.Elected()) {
		t.Fatal("the manager says it leads while another identity holds the Lease")
	}

	// The other holder goes: the plain runnable waited for the Lease, no more.
	lease.Spec.HolderIdentity = nil
	if _, err := kube.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	within(t, waitLimit, mgr.Elected(), "the manager leads once the Lease is free")
	within(t, waitLimit, plain, "the plain runnable starts on leading")
}

// gatedManager starts a Manager whose cache watches through gate, caching
// ConfigMaps in ns, and returns once the ConfigMap informer has synced.
func gatedManager(t *testing.T, ns string, gate *watchGate, opts manager.Options) manager.Manager {
	t.Helper()
	cfg := config(t)
	cfg.Wrap(gate.wrap)
	opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	mgr := newManager(t, cfg, opts)
	start(t, mgr)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the ConfigMap informer: %v", err)
	}
	return mgr
}

// TestCachedClientMissesItsOwnCreate: mgr.GetClient() writes to the API
// server and reads from the cache, which learns of the write only through
// its watch. With the watch held back, a Get right after a successful Create
// is NotFound, while mgr.GetAPIReader() finds the object; once the watch
// delivers, the cache has it.
func TestCachedClientMissesItsOwnCreate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	gate := &watchGate{}
	defer gate.release()
	mgr := gatedManager(t, ns, gate, manager.Options{})
	ctx := context.Background()

	gate.hold()
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}}
	if err := mgr.GetClient().Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(created)
	// A second is plenty for the watch to deliver, were it not held: the
	// miss is the cache's, not a race the test happens to win.
	time.Sleep(time.Second)
	if err := mgr.GetClient().Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get through mgr.GetClient() a second after Create, watch held: %v; want NotFound from the cache", err)
	}
	live := &corev1.ConfigMap{}
	if err := mgr.GetAPIReader().Get(ctx, key, live); err != nil {
		t.Fatalf("mgr.GetAPIReader(): %v", err)
	}
	if live.ResourceVersion != created.ResourceVersion {
		t.Errorf("mgr.GetAPIReader() read resourceVersion %s; Create returned %s", live.ResourceVersion, created.ResourceVersion)
	}

	gate.release()
	deadline := time.Now().Add(waitLimit)
	for {
		err := mgr.GetClient().Get(ctx, key, &corev1.ConfigMap{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("the cache after the watch resumed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadYourWritesWaitsForTheCache: with the experimental
// client.CacheOptions.EnableReadYourWritesConsistency, the same Get waits
// until the cache has seen the Create's resourceVersion instead of
// answering NotFound: with the watch held back it runs out of time, and
// once the watch delivers it returns the object.
func TestReadYourWritesWaitsForTheCache(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	gate := &watchGate{}
	defer gate.release()
	mgr := gatedManager(t, ns, gate, manager.Options{
		Client: client.Options{Cache: &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}},
	})
	ctx := context.Background()

	gate.hold()
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}}
	if err := mgr.GetClient().Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(created)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := mgr.GetClient().Get(short, key, &corev1.ConfigMap{})
	cancel()
	if err == nil || apierrors.IsNotFound(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get right after Create, watch held: %v; want it to wait for the cache until its deadline", err)
	}
	t.Logf("Get with the watch held: %v", err)

	gate.release()
	got := &corev1.ConfigMap{}
	long, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := mgr.GetClient().Get(long, key, got); err != nil {
		t.Fatalf("Get once the watch resumed: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion {
		t.Errorf("the cache returned resourceVersion %s; Create returned %s", got.ResourceVersion, created.ResourceVersion)
	}
}

// TestCacheSyncTimeoutNamesTheKindNotWhy: a controller whose informer
// cannot list (a user with no RBAC) fails mgr.Start after its
// CacheSyncTimeout; the error names the controller and the Go type of the
// source, not the reason: the word forbidden is only in client-go's log.
func TestCacheSyncTimeoutNamesTheKindNotWhy(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody-in-particular"}
	mgr := newManager(t, cfg, manager.Options{})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("pitfalls").
		For(&corev1.ConfigMap{}).
		// The name is per process: -count=2 would register it twice.
		WithOptions(controller.Options{CacheSyncTimeout: 2 * time.Second, SkipNameValidation: ptr.To(true)}).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	run := start(t, mgr)
	within(t, waitLimit, run.done, "mgr.Start fails")
	want := "failed to wait for pitfalls caches to sync kind source: *v1.ConfigMap: timed out waiting for cache to be synced for kind source: *v1.ConfigMap"
	if run.err == nil || !strings.Contains(run.err.Error(), want) {
		t.Fatalf("mgr.Start returned %v; want an error containing %q", run.err, want)
	}
	for _, absent := range []string{"forbidden", "nobody-in-particular"} {
		if strings.Contains(run.err.Error(), absent) {
			t.Errorf("the error says %q: %v", absent, run.err)
		}
	}
	t.Logf("mgr.Start: %v", run.err)
}

// TestInformerMadeBeforeStartHoldsTheManager: an informer requested before
// mgr.Start (here by IndexField) is in the cache the Caches group waits for,
// with no timeout. When it cannot list, Start neither fails nor goes on to
// the election: nothing in the LeaderElection group starts. A grant made
// later lets the informer sync, and the Manager goes on.
func TestInformerMadeBeforeStartHoldsTheManager(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	ns := env.Namespace(t)
	const user = "pitfalls-granted-late"
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	mgr := newManager(t, cfg, manager.Options{
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "keys", func(o client.Object) []string {
		var keys []string
		for k := range o.(*corev1.ConfigMap).Data {
			keys = append(keys, k)
		}
		return keys
	}); err != nil {
		t.Fatal(err)
	}
	plain := make(chan struct{})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		close(plain)
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	run := start(t, mgr)
	select {
	case <-plain:
		t.Fatal("the plain runnable started while the ConfigMap informer could not list")
	case <-run.done:
		t.Fatalf("mgr.Start returned while the ConfigMap informer could not list: %v", run.err)
	case <-time.After(3 * time.Second):
	}

	kube := env.KubeClient(t)
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	within(t, waitLimit, plain, "the plain runnable starts once the informer can list")
}
