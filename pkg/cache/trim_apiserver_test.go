package cache_test

import (
	"context"
	"io"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// TestTrimmedCacheAgainstAPIServer applies a maximal WebApp's children to a
// real API server, with its defaults, and reads them through the caches as
// the operator does: what is cached is up to date with what handroll
// applies; a hand edit of a field handroll sets shows as drift; applying
// again (the reconciler's repair) makes the cache up to date again. It also
// logs what each child costs in the cache, before and after the transform.
func TestTrimmedCacheAgainstAPIServer(t *testing.T) {
	ctx, cp := startControlPlane(t)
	ns := cp.Namespace(t)
	kube := cp.KubeClient(t)
	w := maximalWebApp(ns)
	handrollv1.SetObjectDefaults_WebApp(w)
	apply := metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}
	desiredDep := webapp.DesiredDeployment(w, nil)
	desiredSvc := webapp.DesiredService(w)
	desiredCM := webapp.DesiredConfigMap(w)
	applyAll := func() {
		t.Helper()
		if _, err := kube.CoreV1().ConfigMaps(ns).Apply(ctx, desiredCM, apply); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().Services(ns).Apply(ctx, desiredSvc, apply); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.AppsV1().Deployments(ns).Apply(ctx, desiredDep, apply); err != nil {
			t.Fatal(err)
		}
	}
	applyAll()
	setDeploymentStatus(ctx, t, kube, ns, w.Name)

	caches := startTrimmedCaches(ctx, t, cp, ns)
	cached := func(t *testing.T, g cacheGetter) metav1.Object {
		t.Helper()
		return cachedAtServerVersion(ctx, t, g)
	}
	kinds := cachedKinds(ctx, kube, caches, ns, w.Name, desiredDep, desiredSvc, desiredCM)
	dep := kinds[0].get

	for _, k := range kinds {
		got := cached(t, k.get)
		if d := firstDifference(t, k.desired, got); d != "" {
			t.Errorf("%s: the cached object differs from what handroll applied at %s", k.kind, d)
		}
		full, err := k.get.server()
		if err != nil {
			t.Fatal(err)
		}
		stripped, _ := handrollcache.StripForCache(deepCopy(full))
		t.Logf("%s: %s in the API server's answer, %s after StripForCache, %s cached (TrimChild)", k.kind,
			sizes(t, full), sizes(t, stripped), sizes(t, got))
	}
	logTypicalSizes(ctx, t, kube, caches, ns)
	if d := cached(t, dep).(*appsv1.Deployment); d.Status.AvailableReplicas != 3 || len(d.Status.Conditions) != 2 || d.Status.Conditions[0].Reason == "" || d.Generation == 0 {
		t.Errorf("the Deployment status ComputeStatus reads is not cached: generation %d, %+v", d.Generation, d.Status)
	}

	// Hand edits, as kubectl edit makes them: another manager, an update.
	editChildrenByHand(ctx, t, kube, ns, w.Name, *desiredCM.Name)
	drift := map[string]string{
		"Deployment": ".spec.template.spec.containers[name=app].image",
		"Service":    ".spec.selector." + webapp.LabelInstance,
		"ConfigMap":  ".data.feature",
	}
	for _, k := range kinds {
		if got := firstDifference(t, k.desired, cached(t, k.get)); got != drift[k.kind] {
			t.Errorf("%s edited by hand: FirstDifference of the cached object %q; want %q", k.kind, got, drift[k.kind])
		}
	}

	// The reconciler's repair: apply again. The cache then shows the
	// children up to date, so the next reconcile writes nothing.
	applyAll()
	for _, k := range kinds {
		if d := firstDifference(t, k.desired, cached(t, k.get)); d != "" {
			t.Errorf("%s applied again: the cached object still differs at %s", k.kind, d)
		}
	}
}

// cacheGetter reads one child from the API server and from the cache.
type cacheGetter struct {
	server func() (metav1.Object, error)
	cache  func() (metav1.Object, error)
}

// cachedKind is one kind of child: what handroll applies, and its getter.
type cachedKind struct {
	kind    string
	desired any
	get     cacheGetter
}

// cachedKinds are the WebApp's children: what handroll applies to each,
// and how to read it from the API server and from caches.
func cachedKinds(ctx context.Context, kube kubernetes.Interface, caches *handrollcache.Caches, ns, name string,
	desiredDep *appsv1ac.DeploymentApplyConfiguration, desiredSvc *corev1ac.ServiceApplyConfiguration, desiredCM *corev1ac.ConfigMapApplyConfiguration,
) []cachedKind {
	deployments, services, configMaps := caches.DeploymentLister().Deployments(ns), caches.ServiceLister().Services(ns), caches.ConfigMapLister().ConfigMaps(ns)
	dep := cacheGetter{
		server: func() (metav1.Object, error) {
			return kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		cache: func() (metav1.Object, error) { return deployments.Get(name) },
	}
	svc := cacheGetter{
		server: func() (metav1.Object, error) { return kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}) },
		cache:  func() (metav1.Object, error) { return services.Get(name) },
	}
	cm := cacheGetter{
		server: func() (metav1.Object, error) {
			return kube.CoreV1().ConfigMaps(ns).Get(ctx, *desiredCM.Name, metav1.GetOptions{})
		},
		cache: func() (metav1.Object, error) { return configMaps.Get(*desiredCM.Name) },
	}
	return []cachedKind{{"Deployment", desiredDep, dep}, {"Service", desiredSvc, svc}, {"ConfigMap", desiredCM, cm}}
}

// cachedAtServerVersion waits until the cache holds g's object at the API
// server's current resourceVersion, and returns it.
func cachedAtServerVersion(ctx context.Context, t *testing.T, g cacheGetter) metav1.Object {
	t.Helper()
	want, err := g.server()
	if err != nil {
		t.Fatal(err)
	}
	var got metav1.Object
	if err := budget.Poll(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, err = g.cache()
		return err == nil && got.GetResourceVersion() == want.GetResourceVersion(), nil
	}); err != nil {
		t.Fatalf("the cache does not show %s at resourceVersion %s: %v", want.GetName(), want.GetResourceVersion(), err)
	}
	return got
}

// editChildrenByHand edits a field handroll sets in each child, as kubectl
// edit does: another manager, an update.
func editChildrenByHand(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, name, configMap string) {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
	if _, err := kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	s, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not the port: it is the key of the list's elements in server-side
	// apply, so the apply adds an element rather than reverting the edit.
	s.Spec.Selector[webapp.LabelInstance] = "other"
	if _, err := kube.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	c, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, configMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Data["feature"] = "off"
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}

// startControlPlane starts etcd and kube-apiserver for one test, with a
// budget of its own, and returns a context that bounds the test's work.
func startControlPlane(t *testing.T) (context.Context, *controlplane.ControlPlane) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	cp, err := controlplane.StartWithBudget(controlplane.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := budget.Context(t, context.Background(), 4*time.Minute, t.Name()+" against the API server")
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	return ctx, cp
}

// startTrimmedCaches runs the caches as the operator configures them, on
// namespace ns.
func startTrimmedCaches(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string) *handrollcache.Caches {
	t.Helper()
	hr, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := handrollcache.New(cp.KubeClient(t), hr, meta, handrollcache.Options{
		Namespaces:       []string{ns},
		ChildSelector:    webapp.ChildSelector,
		MetadataSelector: webapp.ForeignSelector,
	})
	c.Deployments()
	c.Services()
	c.ConfigMaps()
	c.Metadata(handrollcache.ConfigMapsResource)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Shutdown() })
	c.Start(stop)
	syncCtx, cancel := budget.Context(t, ctx, time.Minute, "the trimmed caches to sync")
	defer cancel()
	if err := c.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return c
}

// setDeploymentStatus writes the status the Deployment controller would
// (no controller runs here), so that the sizes are those of a typical
// Deployment.
func setDeploymentStatus(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
				Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
				Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "` + name + `-5d8f7c9b6d" has successfully progressed.`},
		}}
	if _, err := kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatal(err)
	}
}

func deepCopy(o metav1.Object) any {
	return reflect.ValueOf(o).MethodByName("DeepCopy").Call(nil)[0].Interface()
}

// logTypicalSizes applies the children of a WebApp with a common spec and
// logs what the cache holds of them.
func logTypicalSizes(ctx context.Context, t *testing.T, kube kubernetes.Interface, caches *handrollcache.Caches, ns string) {
	t.Helper()
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "typical", Namespace: ns, UID: "4c7b1a3e-0000-4000-8000-000000000002"},
		Spec: handrollv1.WebAppSpec{
			Image: "registry.example/team/shop:2.4.1", Replicas: ptr.To[int32](3),
			Env:       []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			Config:    map[string]string{"app.yaml": "level: info\n"},
		},
	}
	handrollv1.SetObjectDefaults_WebApp(w)
	apply := metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}
	if _, err := kube.CoreV1().ConfigMaps(ns).Apply(ctx, webapp.DesiredConfigMap(w), apply); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Services(ns).Apply(ctx, webapp.DesiredService(w), apply); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Apply(ctx, webapp.DesiredDeployment(w, nil), apply); err != nil {
		t.Fatal(err)
	}
	setDeploymentStatus(ctx, t, kube, ns, w.Name)
	for _, k := range []struct {
		kind   string
		server func() (metav1.Object, error)
		cache  func() (metav1.Object, error)
	}{
		{"Deployment", func() (metav1.Object, error) {
			return kube.AppsV1().Deployments(ns).Get(ctx, w.Name, metav1.GetOptions{})
		},
			func() (metav1.Object, error) { return caches.DeploymentLister().Deployments(ns).Get(w.Name) }},
		{"Service", func() (metav1.Object, error) { return kube.CoreV1().Services(ns).Get(ctx, w.Name, metav1.GetOptions{}) },
			func() (metav1.Object, error) { return caches.ServiceLister().Services(ns).Get(w.Name) }},
		{"ConfigMap", func() (metav1.Object, error) {
			return kube.CoreV1().ConfigMaps(ns).Get(ctx, handrollv1.OwnedConfigMapName(w.Name), metav1.GetOptions{})
		}, func() (metav1.Object, error) {
			return caches.ConfigMapLister().ConfigMaps(ns).Get(handrollv1.OwnedConfigMapName(w.Name))
		}},
	} {
		full, err := k.server()
		if err != nil {
			t.Fatal(err)
		}
		var got metav1.Object
		if err := budget.Poll(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got, err = k.cache()
			return err == nil && got.GetResourceVersion() == full.GetResourceVersion(), nil
		}); err != nil {
			t.Fatalf("typical %s not cached: %v", k.kind, err)
		}
		stripped, _ := handrollcache.StripForCache(deepCopy(full))
		t.Logf("typical %s: %s in the API server's answer, %s after StripForCache, %s cached (TrimChild)", k.kind,
			sizes(t, full), sizes(t, stripped), sizes(t, got))
	}
}

// TestEachObjectCachedOnce: with the operator's selectors, an object
// labelled as handroll's is cached whole (trimmed) and not again as
// metadata, and any other object as metadata alone, so that a child's
// event is decoded once.
func TestEachObjectCachedOnce(t *testing.T) {
	ctx, cp := startControlPlane(t)
	ns := cp.Namespace(t)
	kube := cp.KubeClient(t)
	for name, labels := range map[string]map[string]string{
		"ours":    {webapp.LabelManagedBy: webapp.ManagedBy},
		"foreign": {webapp.LabelManagedBy: "someone-else"},
		"plain":   nil,
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startTrimmedCaches(ctx, t, cp, ns)
	whole, meta := c.ConfigMapLister(), c.MetadataLister(handrollcache.ConfigMapsResource)
	for name, want := range map[string]struct{ whole, meta bool }{
		"ours":    {whole: true},
		"foreign": {meta: true},
		"plain":   {meta: true},
	} {
		_, err := whole.ConfigMaps(ns).Get(name)
		if got := err == nil; got != want.whole {
			t.Errorf("ConfigMap %s in the ConfigMaps cache: %v, want %v (%v)", name, got, want.whole, err)
		}
		_, err = meta.Get(ns, name)
		if got := err == nil; got != want.meta {
			t.Errorf("ConfigMap %s in the metadata cache: %v, want %v (%v)", name, got, want.meta, err)
		}
	}
}
