package webapp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
	"github.com/handroll/handroll/pkg/shard"
)

// notYetSeen is a metadata cache that has not seen the object asked for:
// the state of every cache for a moment after a user's object and its
// WebApp are applied together.
type notYetSeen struct{}

func (notYetSeen) Get(_, name string) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "not-yet-seen"}, name)
}

// staleReconciler is the reconciler as handroll runs it, writing to the
// package's API server, with every child cache empty: a child the caches
// have not seen yet. Only the WebApp itself is in its cache.
func staleReconciler(t *testing.T, w *handrollv1.WebApp, sharded bool, cached ...*corev1.Service) (*webapp.Reconciler, *events.FakeRecorder) {
	t.Helper()
	webapps := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := webapps.Add(w); err != nil {
		t.Fatal(err)
	}
	empty := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	services := empty()
	for _, svc := range cached {
		if err := services.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	recorder := events.NewFakeRecorder(100)
	r := &webapp.Reconciler{
		WebApps:               handrolllisters.NewWebAppLister(webapps),
		Deployments:           appslisters.NewDeploymentLister(empty()),
		Services:              corelisters.NewServiceLister(services),
		ConfigMaps:            corelisters.NewConfigMapLister(empty()),
		Client:                handrollClient(t),
		Kube:                  kubeClient(t),
		Recorder:              recorder,
		ChildrenCacheFiltered: true,
		DeploymentMeta:        notYetSeen{},
		ServiceMeta:           notYetSeen{},
		ConfigMapMeta:         notYetSeen{},
	}
	if sharded {
		// As --shards runs it: each child also carries its owner's bucket.
		r.ChildLabels = func(*handrollv1.WebApp) map[string]string { return map[string]string{shard.BucketLabel: "7"} }
	}
	return r, recorder
}

// foreignChild is a user's object of kind with a child's name, not
// controlled by any WebApp.
func foreignChild(t *testing.T, kind, ns, name string) (create func(context.Context) metav1.Object, get func(context.Context) (metav1.Object, error)) {
	kube := kubeClient(t)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "other"}}
	switch kind {
	case "ConfigMap":
		return func(ctx context.Context) metav1.Object {
				o, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"theirs": "yes"}}, metav1.CreateOptions{})
				must(t, err)
				return o
			}, func(ctx context.Context) (metav1.Object, error) {
				return kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			}
	case "Service":
		return func(ctx context.Context) metav1.Object {
				o, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Name: "https", Port: 443}},
				}}, metav1.CreateOptions{})
				must(t, err)
				return o
			}, func(ctx context.Context) (metav1.Object, error) {
				return kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			}
	default:
		labels := map[string]string{"app": "theirs"}
		return func(ctx context.Context) metav1.Object {
				o, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "theirs", Image: "theirs:1"}}},
					},
				}}, metav1.CreateOptions{})
				must(t, err)
				return o
			}, func(ctx context.Context) (metav1.Object, error) {
				return kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			}
	}
}

// noWebAppsLeft deletes ns's WebApps when t ends, before its namespace:
// with no namespace controller here, a WebApp left in conflict would keep
// the next tests' operators retrying it.
func noWebAppsLeft(t *testing.T, ns string) {
	t.Cleanup(func() {
		err := handrollClient(t).HandrollV1().WebApps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			t.Errorf("deleting the WebApps of %s: %v", ns, err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// unchanged fails t unless obj is still exactly as created was.
func unchanged(t *testing.T, kind string, created metav1.Object, get func(context.Context) (metav1.Object, error)) {
	t.Helper()
	now, err := get(context.Background())
	if err != nil {
		t.Fatalf("the user's %s: %v", kind, err)
	}
	if now.GetResourceVersion() != created.GetResourceVersion() || len(now.GetOwnerReferences()) != 0 || len(now.GetLabels()) != 1 {
		t.Fatalf("the user's %s %s was changed: resourceVersion %s -> %s, owners %v, labels %v",
			kind, created.GetName(), created.GetResourceVersion(), now.GetResourceVersion(), now.GetOwnerReferences(), now.GetLabels())
	}
}

// TestChildTheCachesHaveNotSeenIsCreatedNotTakenOver: a user's object with
// a child's name, which the caches have not seen yet (applied with its
// WebApp in one go), is left exactly as it was, for every child kind, with
// and without shards. The WebApp reports it, Stalled, with a Warning; the
// other children are made; once the name is free the child is created.
func TestChildTheCachesHaveNotSeenIsCreatedNotTakenOver(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		for _, kind := range []string{"ConfigMap", "Service", "Deployment"} {
			t.Run(fmt.Sprintf("%s/sharded=%t", kind, sharded), func(t *testing.T) {
				childTakenBeforeTheCachesSawIt(t, kind, sharded)
			})
		}
	}
}

func childTakenBeforeTheCachesSawIt(t *testing.T, kind string, sharded bool) {
	ctx := context.Background()
	ns := env.Namespace(t)
	noWebAppsLeft(t, ns)
	name := "web"
	if kind == "ConfigMap" {
		name = handrollv1.OwnedConfigMapName("web")
	}
	create, get := foreignChild(t, kind, ns, name)
	foreign := create(ctx)
	w := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Config: map[string]string{"k": "v"}},
	})
	r, recorder := staleReconciler(t, w, sharded)
	req := controller.Request{Namespace: ns, Name: "web"}

	_, err := r.Reconcile(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "not controlled by WebApp") {
		t.Fatalf("Reconcile: %v, want the conflict", err)
	}
	unchanged(t, kind, foreign, get)

	got, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, err)
	ready := meta.FindStatusCondition(got.Status.Conditions, handrollv1.ConditionReady)
	stalled := meta.FindStatusCondition(got.Status.Conditions, handrollv1.ConditionStalled)
	what := kind + " " + ns + "/" + name
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != webapp.ReasonResourceConflict || !strings.Contains(ready.Message, what) ||
		stalled == nil || stalled.Status != metav1.ConditionTrue {
		t.Fatalf("status: %s, want Ready False %s naming %s, and Stalled", asJSON(got.Status.Conditions), webapp.ReasonResourceConflict, what)
	}
	if !warned(recorder, webapp.EventResourceConflict, what) {
		t.Fatalf("no Warning %s event naming %s", webapp.EventResourceConflict, what)
	}
	// The other children are made, and are the WebApp's.
	for _, other := range []string{"ConfigMap", "Service", "Deployment"} {
		if other == kind {
			continue
		}
		otherName := "web"
		if other == "ConfigMap" {
			otherName = handrollv1.OwnedConfigMapName("web")
		}
		_, getOther := foreignChild(t, other, ns, otherName)
		o, err := getOther(ctx)
		must(t, err)
		if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != w.UID {
			t.Fatalf("%s %s is not controlled by the WebApp: %v", other, otherName, o.GetOwnerReferences())
		}
	}

	// Retried, still with caches that know nothing: still untouched.
	if _, err := r.Reconcile(ctx, req); err == nil {
		t.Fatal("second Reconcile: no error, want the conflict again")
	}
	unchanged(t, kind, foreign, get)

	// Once the name is free, the child is created and is the WebApp's.
	must(t, deleteObject(ctx, t, kind, ns, name))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile once the name is free: %v", err)
	}
	o, err := get(ctx)
	must(t, err)
	if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != w.UID {
		t.Fatalf("%s %s after the user's was deleted: owners %v, want the WebApp", kind, name, o.GetOwnerReferences())
	}
	// The caches still have not seen it: the API server says it is ours,
	// and the reconcile goes on as for any child of ours.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile with the caches behind our own children: %v", err)
	}
}

func deleteObject(ctx context.Context, t *testing.T, kind, ns, name string) error {
	kube := kubeClient(t)
	switch kind {
	case "ConfigMap":
		return kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "Service":
		return kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// warned tells whether recorder holds a Warning with reason naming what.
func warned(recorder *events.FakeRecorder, reason, what string) bool {
	for {
		select {
		case e := <-recorder.Events:
			if strings.HasPrefix(e, corev1.EventTypeWarning+" "+reason+" ") && strings.Contains(e, what) {
				return true
			}
		default:
			return false
		}
	}
}

// TestChildReplacedBehindTheCacheIsNotTakenOver: the cache still holds the
// WebApp's own Service, but the API server holds a user's of the same name,
// made after ours was deleted. The apply names the object it means (its
// uid), so the user's is left exactly as it was and reported.
func TestChildReplacedBehindTheCacheIsNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	noWebAppsLeft(t, ns)
	w := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	r, _ := staleReconciler(t, w, false)
	req := controller.Request{Namespace: ns, Name: "web"}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	ours, err := kubeClient(t).CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, err)
	// An older copy, as a cache that missed the deletion still shows it.
	stale := ours.DeepCopy()
	stale.Spec.Ports[0].Port++
	must(t, deleteObject(ctx, t, "Service", ns, "web"))
	create, get := foreignChild(t, "Service", ns, "web")
	foreign := create(ctx)

	r, recorder := staleReconciler(t, w, false, stale)
	_, err = r.Reconcile(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "not controlled by WebApp") {
		t.Fatalf("Reconcile: %v, want the conflict", err)
	}
	unchanged(t, "Service", foreign, get)
	if what := "Service " + ns + "/web"; !warned(recorder, webapp.EventResourceConflict, what) {
		t.Fatalf("no Warning %s event naming %s", webapp.EventResourceConflict, what)
	}
}

// TestUserServiceAppliedWithItsWebAppIsNeverTakenOver: a user's Service and
// a WebApp of the same name, created at the same moment, many times over,
// against the running operator. Whichever comes first, the user's Service,
// when it was created, is never changed.
func TestUserServiceAppliedWithItsWebAppIsNeverTakenOver(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	noWebAppsLeft(t, ns)
	ctx := context.Background()
	const pairs = 30
	created := make([]metav1.Object, pairs)
	var wg sync.WaitGroup
	for i := range pairs {
		name := fmt.Sprintf("race-%d", i)
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			svc, err := kubeClient(t).CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "other"}},
				Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
			}, metav1.CreateOptions{})
			if err == nil {
				created[i] = svc
			} else if !apierrors.IsAlreadyExists(err) {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			_, err := handrollClient(t).HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Error(err)
			}
		}()
		close(start)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	users := 0
	for i := range pairs {
		name := fmt.Sprintf("race-%d", i)
		w := converged(t, ns, name)
		if created[i] == nil {
			continue // the operator's came first: the user's create was refused
		}
		users++
		_, get := foreignChild(t, "Service", ns, name)
		unchanged(t, "Service", created[i], get)
		ready := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
		if ready == nil || ready.Reason != webapp.ReasonResourceConflict {
			t.Errorf("WebApp %s beside the user's Service: Ready %s, want reason %s", name, asJSON(ready), webapp.ReasonResourceConflict)
		}
	}
	t.Logf("%d of %d user Services were created first and left untouched", users, pairs)
	if users == 0 {
		t.Fatal("no user Service was ever created first: the race was not run")
	}
}
