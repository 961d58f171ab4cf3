package webapp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	handrollinformers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// legacyFinalizer is the finalizer the first version of the directory put on
// every WebApp; spelled out here, as exported YAML and old objects carry it.
const legacyFinalizer = "handroll.dev/directory"

// directoryData reads the directory ConfigMap from the API server; nil when
// it does not exist.
func directoryData(t *testing.T, ctx context.Context, opNS string) (map[string]string, error) {
	t.Helper()
	cm, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}

// directoryBecomes waits until the directory holds exactly want (an absent
// directory counts as empty), then checks that it stays so for a while: a
// leaked or missing entry that a late write brings back is caught too.
func directoryBecomes(t *testing.T, opNS string, want map[string]string) {
	t.Helper()
	var got map[string]string
	exact := func(ctx context.Context) (bool, error) {
		var err error
		got, err = directoryData(t, ctx, opNS)
		if err != nil {
			return false, err
		}
		return maps.Equal(got, want) || (len(got) == 0 && len(want) == 0), nil
	}
	ctx, cancel := budget.Context(t, context.Background(), 30*time.Second, "the directory to list exactly the WebApps")
	defer cancel()
	for {
		if ok, err := exact(ctx); err == nil && ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the directory is not exact:\n got %v\nwant %v", got, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second)
	if ok, err := exact(context.Background()); err != nil || !ok {
		t.Fatalf("the directory changed after it was exact (%v):\n got %v\nwant %v", err, got, want)
	}
}

func gone(t *testing.T, ns, name string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			t.Logf("%s/%s: deletionTimestamp %v, finalizers %v", ns, name, w.DeletionTimestamp, w.Finalizers)
		}
		return false, err
	}
}

// TestRestoredWebAppWithTheOldFinalizerIsDeleted: a WebApp created with
// handroll.dev/directory already in metadata.finalizers (kubectl create -f
// of exported YAML, a backup restore: the finalizer is owned by another
// field manager) is released on delete, and leaves the directory.
func TestRestoredWebAppWithTheOldFinalizerIsDeleted(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	ctx := context.Background()
	_, err := handrollClient(t).HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns, Finalizers: []string{legacyFinalizer}},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	w := converged(t, ns, "restored")
	directoryBecomes(t, opNS, map[string]string{webapp.DirectoryKey(ns, "restored"): w.Status.URL})

	if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(ctx, "restored", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restored WebApp is deleted", gone(t, ns, "restored"))
	directoryBecomes(t, opNS, nil)
}

// TestQuickCreateAndDeleteLeaveTheDirectoryExact: WebApps created and
// deleted at once, many at a time, whatever the timing between the writes
// and the cache, leave no entry behind; the WebApps that stay are listed.
func TestQuickCreateAndDeleteLeaveTheDirectoryExact(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	client := handrollClient(t).HandrollV1().WebApps(ns)
	want := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("stays-%d", i)
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
		want[webapp.DirectoryKey(ns, name)] = "http://" + name + "." + ns + ".svc:80"
	}

	const cycles = 50
	var wg sync.WaitGroup
	errs := make(chan error, cycles)
	for i := range cycles {
		wg.Go(func() {
			ctx := context.Background()
			name := fmt.Sprintf("brief-%d", i)
			for round := range 2 {
				if _, err := client.Create(ctx, &handrollv1.WebApp{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
				}, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s (round %d): %w", name, round, err)
					return
				}
				// Let some live long enough to be listed, others not.
				time.Sleep(time.Duration(i%10) * 40 * time.Millisecond)
				if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
					return
				}
				if round == 0 {
					// Same name again, once the first is gone.
					for {
						if _, err := client.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range cycles {
		eventually(t, "brief WebApps are deleted", gone(t, ns, fmt.Sprintf("brief-%d", i)))
	}
	directoryBecomes(t, opNS, want)
}

// TestUpgradeStripsTheOldFinalizer starts the operator on objects written by
// the first version, which kept the directory with a finalizer applied by
// field manager "handroll": one WebApp carries it, one carries it co-owned
// by another manager, one is being deleted with it, and the directory lists
// a WebApp that no longer exists. Every finalizer goes, the deleted WebApp
// with it, and the directory ends exact.
func TestUpgradeStripsTheOldFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	opNS := env.Namespace(t)
	client := handrollClient(t).HandrollV1().WebApps(ns)
	for _, name := range []string{"plain", "coowned", "deleting"} {
		w := createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
		// As the first version applied it.
		ac := handrollac.WebApp(name, ns).WithUID(w.UID).WithFinalizers(legacyFinalizer)
		if _, err := client.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}); err != nil {
			t.Fatal(err)
		}
		if name == "coowned" {
			if _, err := client.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "restore-tool", Force: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := client.Delete(ctx, "deleting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	for _, name := range []string{"plain", "coowned", "deleting", "long-gone"} {
		old[webapp.DirectoryKey(ns, name)] = "http://" + name + "." + ns + ".svc:80"
	}
	if _, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Labels: map[string]string{
			webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory",
		}},
		Data: old,
	}, metav1.CreateOptions{FieldManager: webapp.FieldManager}); err != nil {
		t.Fatal(err)
	}

	operator.Start(t, env.Kubeconfig, "--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS, "--namespaces="+ns)

	eventually(t, "the WebApp being deleted is released", gone(t, ns, "deleting"))
	for _, name := range []string{"plain", "coowned"} {
		eventually(t, name+" loses the old finalizer", func(ctx context.Context) (bool, error) {
			w, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(w.Finalizers) == 0, nil
		})
	}
	directoryBecomes(t, opNS, map[string]string{
		webapp.DirectoryKey(ns, "plain"):   "http://plain." + ns + ".svc:80",
		webapp.DirectoryKey(ns, "coowned"): "http://coowned." + ns + ".svc:80",
	})
}

// TestForeignServiceIsNotAdvertised: when the Service's name is taken by an
// object the WebApp does not control, nothing points at it: status.url is
// empty and the directory has no entry. Once the foreign Service goes, the
// WebApp's own Service is made and advertised.
func TestForeignServiceIsNotAdvertised(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	kube := kubeClient(t)
	ctx := context.Background()
	// Labelled as ours, so that it is in the operator's (filtered) cache:
	// only the controller reference tells it is not.
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{webapp.LabelManagedBy: webapp.ManagedBy}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "other"} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	var w *handrollv1.WebApp
	eventually(t, "the WebApp reports the conflict", func(ctx context.Context) (bool, error) {
		var err error
		w, err = handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
		return c != nil && c.Reason == webapp.ReasonResourceConflict, nil
	})
	if w.Status.URL != "" {
		t.Errorf("status.url %q advertises a Service the WebApp does not control", w.Status.URL)
	}
	// "other" is listed: the directory has been written, and without "web".
	directoryBecomes(t, opNS, map[string]string{webapp.DirectoryKey(ns, "other"): "http://other." + ns + ".svc:80"})

	if err := kube.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	url := "http://web." + ns + ".svc:80"
	eventually(t, "the WebApp heals and shows its URL", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && w.Status.URL == url, err
	})
	directoryBecomes(t, opNS, map[string]string{
		webapp.DirectoryKey(ns, "other"): "http://other." + ns + ".svc:80",
		webapp.DirectoryKey(ns, "web"):   url,
	})
}

// writeCounter counts the writes a client sends to ConfigMaps.
type writeCounter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/configmaps") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(req)
}

// countingKube is an admin clientset, not rate limited, whose ConfigMap
// writes are counted.
func countingKube(t *testing.T) (kubernetes.Interface, *writeCounter) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // no client-side rate limit
	w := &writeCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { w.next = rt; return w })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube, w
}

// inMemoryWebApps are n WebApps, each with the Service it controls, in
// indexers only (the API server holds none of them), over 40 namespaces;
// and the directory they call for.
func inMemoryWebApps(t *testing.T, n int) (webapps, services cache.Indexer, want map[string]string) {
	t.Helper()
	index := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	webapps, services, want = index(), index(), map[string]string{}
	for i := range n {
		ns, name := fmt.Sprintf("tenant-%03d-prod-eu-west", i%40), fmt.Sprintf("storefront-%05d-canary", i)
		w := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprint("uid-", i))}}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: name, UID: w.UID, Controller: ptr.To(true),
		}}}}
		if err := errors.Join(webapps.Add(w), services.Add(svc)); err != nil {
			t.Fatal(err)
		}
		want[webapp.DirectoryKey(ns, name)] = webapp.URL(w)
	}
	return webapps, services, want
}

// directoryReconciler reconciles the directory of opNS from the in-memory
// WebApps and Services, with a real informer on opNS's ConfigMaps; the
// function it returns waits until that informer holds what the API server
// does.
func directoryReconciler(t *testing.T, kube kubernetes.Interface, opNS string, webapps, services cache.Indexer) (*webapp.DirectoryReconciler, func()) {
	t.Helper()
	f := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(opNS))
	configMaps := f.Core().V1().ConfigMaps()
	informer := configMaps.Informer()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	caughtUp := func() {
		t.Helper()
		eventually(t, "the ConfigMap cache catches up", func(ctx context.Context) (bool, error) {
			list, err := kubeClient(t).CoreV1().ConfigMaps(opNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			if len(informer.GetStore().ListKeys()) != len(list.Items) {
				return false, nil
			}
			for _, cm := range list.Items {
				obj, cached, _ := informer.GetStore().GetByKey(opNS + "/" + cm.Name)
				if !cached || obj.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
					return false, nil
				}
			}
			return true, nil
		})
	}
	return &webapp.DirectoryReconciler{
		WebApps:    handrolllisters.NewWebAppLister(webapps),
		Services:   handrollcache.NewServiceMeta(services),
		ConfigMaps: configMaps.Lister(),
		Kube:       kube,
		Namespace:  opNS,
	}, caughtUp
}

// settle reconciles, each time on a cache that has caught up, until a
// reconcile writes nothing; check runs after every reconcile that wrote.
// It returns the number of reconciles that wrote.
func settle(t *testing.T, r *webapp.DirectoryReconciler, writes *writeCounter, caughtUp func(), check func()) int {
	t.Helper()
	for n := 0; n < 10; n++ {
		before := writes.n.Load()
		if _, err := r.Reconcile(context.Background(), controller.Request{Namespace: r.Namespace, Name: webapp.DirectoryName}); err != nil {
			t.Fatalf("reconcile %d: %.500v", n, err)
		}
		if writes.n.Load() == before {
			return n
		}
		caughtUp()
		check()
	}
	t.Fatal("the directory does not settle in 10 reconciles")
	return 0
}

// snapshot is a client that answers ConfigMap Gets from what opNS holds
// now, so that tens of thousands of lookups cost no round trip each.
func snapshot(t *testing.T, opNS string) kubernetes.Interface {
	t.Helper()
	list, err := kubeClient(t).CoreV1().ConfigMaps(opNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	return snapshotKube{core: snapshotCore{configMaps: snapshotConfigMaps{byName: byName}}}
}

type snapshotKube struct {
	kubernetes.Interface
	core snapshotCore
}

func (s snapshotKube) CoreV1() corev1client.CoreV1Interface { return s.core }

type snapshotCore struct {
	corev1client.CoreV1Interface
	configMaps snapshotConfigMaps
}

func (s snapshotCore) ConfigMaps(string) corev1client.ConfigMapInterface { return s.configMaps }

type snapshotConfigMaps struct {
	corev1client.ConfigMapInterface
	byName map[string]*corev1.ConfigMap
}

func (s snapshotConfigMaps) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	if cm, ok := s.byName[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

// lookUpAll checks that LookupDirectory, on kube, finds every entry of want
// with its URL, and none of gone.
func lookUpAll(t *testing.T, kube kubernetes.Interface, opNS string, want map[string]string, gone []string) {
	t.Helper()
	ctx := context.Background()
	for k, v := range want {
		ns, name, _ := strings.Cut(k, ".")
		url, found, err := webapp.LookupDirectory(ctx, kube, opNS, ns, name)
		if err != nil || !found || url != v {
			t.Fatalf("LookupDirectory %s: %q, %v, %v; want %q", k, url, found, err, v)
		}
	}
	for _, k := range gone {
		ns, name, _ := strings.Cut(k, ".")
		if url, found, err := webapp.LookupDirectory(ctx, kube, opNS, ns, name); err != nil || found {
			t.Fatalf("LookupDirectory %s: %q, %v, %v; want it gone", k, url, found, err)
		}
	}
}

// directoryParts reads every part of opNS's directory from the API server,
// checks that part 0 counts them and that each is within the ConfigMap
// limit, and returns P and all their entries. An entry in two parts is an
// error, unless it is one of shared: another process's, which is copied
// along as P grows and left for its owner to remove (and is not counted
// against the limit).
func directoryParts(t *testing.T, opNS string, shared ...string) (int, map[string]string) {
	t.Helper()
	isShared := map[string]bool{}
	for _, k := range shared {
		isShared[k] = true
	}
	list, err := kubeClient(t).CoreV1().ConfigMaps(opNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parts, entries, largest := 0, map[string]string{}, 0
	found := map[int]bool{}
	for _, cm := range list.Items {
		i, ok := webapp.DirectoryPartIndex(cm.Name)
		if !ok {
			continue
		}
		found[i] = true
		if i == 0 {
			if parts, err = webapp.DirectoryParts(cm.Annotations); err != nil {
				t.Fatal(err)
			}
		}
		size := 0
		for k, v := range cm.Data {
			if isShared[k] {
				entries[k] = v
				continue // its owner's to move: not counted
			}
			size += len(k) + len(v)
			if _, dup := entries[k]; dup {
				t.Errorf("%s is in two parts", k)
			}
			entries[k] = v
		}
		largest = max(largest, size)
	}
	if len(found) != parts {
		t.Errorf("%d parts exist, part 0 says %d", len(found), parts)
	}
	if largest > 1<<19 {
		t.Errorf("the largest part holds %d bytes: too close to the 1 MiB limit", largest)
	}
	t.Logf("%d entries in %d parts, the largest %d bytes", len(entries), parts, largest)
	return parts, entries
}

// TestDirectoryHolds20000WebApps: 20,000 WebApps, twice what one ConfigMap
// can list, are all in the directory and found by LookupDirectory; 1,000 of
// them deleted leave it, exactly; and with nothing changed a reconcile
// writes nothing.
func TestDirectoryHolds20000WebApps(t *testing.T) {
	opNS := env.Namespace(t)
	webapps, services, want := inMemoryWebApps(t, 20_000)
	kube, writes := countingKube(t)
	r, caughtUp := directoryReconciler(t, kube, opNS, webapps, services)

	n := settle(t, r, writes, caughtUp, func() {})
	parts, entries := directoryParts(t, opNS)
	t.Logf("%d reconciles that wrote, %d writes", n, writes.n.Load())
	if parts < 8 {
		t.Errorf("P %d for 20,000 entries", parts)
	}
	if !maps.Equal(entries, want) {
		t.Errorf("the parts hold %d entries, want the %d desired", len(entries), len(want))
	}
	lookUpAll(t, snapshot(t, opNS), opNS, want, nil)
	sample := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(want))[:50] {
		sample[k] = want[k]
	}
	lookUpAll(t, kubeClient(t), opNS, sample, nil) // the same, round trips and all

	var gone []string
	for i, obj := range webapps.List() {
		if i%20 == 0 {
			w := obj.(*handrollv1.WebApp)
			if err := webapps.Delete(w); err != nil {
				t.Fatal(err)
			}
			gone = append(gone, webapp.DirectoryKey(w.Namespace, w.Name))
			delete(want, webapp.DirectoryKey(w.Namespace, w.Name))
		}
	}
	if len(gone) != 1000 {
		t.Fatalf("deleted %d WebApps", len(gone))
	}
	settle(t, r, writes, caughtUp, func() {})
	after, entries := directoryParts(t, opNS)
	if after != parts {
		t.Errorf("P went from %d to %d", parts, after)
	}
	if !maps.Equal(entries, want) {
		t.Errorf("after deleting 1,000: the parts hold %d entries, want %d", len(entries), len(want))
	}
	lookUpAll(t, snapshot(t, opNS), opNS, want, gone)

	before := writes.n.Load()
	if _, err := r.Reconcile(context.Background(), controller.Request{Namespace: opNS, Name: webapp.DirectoryName}); err != nil {
		t.Fatal(err)
	}
	if w := writes.n.Load() - before; w != 0 {
		t.Errorf("nothing changed, yet %d writes", w)
	}
}

// TestDirectoryUpgradeToParts: a single webapp-directory as the version
// before parts wrote it, with entries, one of a WebApp long gone and one of
// a namespace another process watches, then more WebApps than one part
// holds. Every entry a reader found before is found after every step; the
// end is the parts layout, exactly, the other process's entry kept.
func TestDirectoryUpgradeToParts(t *testing.T) {
	opNS := env.Namespace(t)
	webapps, services, want := inMemoryWebApps(t, 12_000)
	old := map[string]string{"elsewhere.kept": "http://kept.elsewhere.svc:80", "tenant-000-prod-eu-west.long-gone": "http://long-gone.tenant-000-prod-eu-west.svc:80"}
	for _, k := range slices.Sorted(maps.Keys(want))[:3000] {
		old[k] = want[k]
	}
	if _, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Labels: map[string]string{
			webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory",
		}},
		Data: old,
	}, metav1.CreateOptions{FieldManager: webapp.FieldManager}); err != nil {
		t.Fatal(err)
	}
	kube, writes := countingKube(t)
	r, caughtUp := directoryReconciler(t, kube, opNS, webapps, services)
	for i := range 40 {
		r.Namespaces = append(r.Namespaces, fmt.Sprintf("tenant-%03d-prod-eu-west", i))
	}
	readable := maps.Clone(old)
	delete(readable, "tenant-000-prod-eu-west.long-gone")
	n := settle(t, r, writes, caughtUp, func() { lookUpAll(t, snapshot(t, opNS), opNS, readable, nil) })

	parts, entries := directoryParts(t, opNS, "elsewhere.kept")
	if parts < 4 {
		t.Errorf("P %d for 12,000 entries", parts)
	}
	t.Logf("%d reconciles that wrote, %d writes", n, writes.n.Load())
	mine := maps.Clone(entries)
	delete(mine, "elsewhere.kept")
	if !maps.Equal(mine, want) {
		t.Errorf("the parts hold %d of our entries, want %d", len(mine), len(want))
	}
	want["elsewhere.kept"] = old["elsewhere.kept"]
	lookUpAll(t, snapshot(t, opNS), opNS, want, []string{"tenant-000-prod-eu-west.long-gone"})
}

// TestDirectoryBurstIsFewWrites: with WriteInterval 1s, 200 WebApps created
// over about 4 s cost the directory a write per second or so, not one per
// WebApp, and the directory ends exact.
func TestDirectoryBurstIsFewWrites(t *testing.T) {
	opNS, ns := env.Namespace(t), env.Namespace(t)
	// No WebApp controller runs here: delete the WebApps, which have no
	// children, before their namespace goes, or a later test's operator that
	// watches every namespace fails to make their children in a namespace
	// being terminated.
	t.Cleanup(func() {
		ctx := context.Background()
		webapps := handrollClient(t).HandrollV1().WebApps(ns)
		if err := webapps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Error(err)
		}
		eventually(t, "the WebApps are deleted", func(ctx context.Context) (bool, error) {
			list, err := webapps.List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, err
		})
	})
	kube, writes := countingKube(t)
	ours := kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = webapp.LabelManagedBy + "=" + webapp.ManagedBy
	})
	hf := handrollinformers.NewSharedInformerFactoryWithOptions(handrollClient(t), 0, handrollinformers.WithNamespace(ns))
	sf := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(ns), ours)
	cf := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(opNS), ours)
	webapps, services, configMaps := hf.Handroll().V1().WebApps(), sf.Core().V1().Services(), cf.Core().V1().ConfigMaps()
	c, err := webapp.NewDirectoryController(&webapp.DirectoryReconciler{
		WebApps: webapps.Lister(), Services: handrollcache.NewServiceMeta(services.Informer().GetIndexer()), ConfigMaps: configMaps.Lister(),
		Kube: kube, Namespace: opNS, Namespaces: []string{ns},
		WriteInterval: time.Second,
	}, webapp.Informers{
		WebApps:    []cache.SharedIndexInformer{webapps.Informer()},
		Services:   []cache.SharedIndexInformer{services.Informer()},
		ConfigMaps: []cache.SharedIndexInformer{configMaps.Informer()},
	}, controller.Options{Name: "directory-burst"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})
	for _, f := range []interface{ Start(<-chan struct{}) }{hf, sf, cf} {
		f.Start(ctx.Done())
	}
	go func() { stopped <- c.Start(ctx) }()

	// A first WebApp, so that the burst starts from a written directory.
	want := map[string]string{}
	create := func(name string) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: handrollv1.WebAppSpec{Image: "nginx:1.27"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubeClient(t).CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{webapp.LabelManagedBy: webapp.ManagedBy},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: name, UID: w.UID, Controller: ptr.To(true)}}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[webapp.DirectoryKey(ns, name)] = "http://" + name + "." + ns + ".svc:80"
	}
	create("first")
	directoryBecomes(t, opNS, want)

	before := writes.n.Load()
	start := time.Now()
	const burst = 200
	for i := range burst {
		time.Sleep(time.Until(start.Add(time.Duration(i) * 4 * time.Second / burst)))
		create(fmt.Sprintf("web-%03d", i))
	}
	spread := time.Since(start)
	directoryBecomes(t, opNS, want)
	n := writes.n.Load() - before
	t.Logf("%d WebApps over %v: %d directory writes", burst, spread.Round(time.Millisecond), n)
	// One per interval over the spread, one for what is left at its end,
	// and one to spare for a conflict with a cache that lagged.
	if limit := int64(spread/time.Second) + 3; n > limit || n > burst/10 {
		t.Errorf("%d writes for %d WebApps over %v; want at most %d", n, burst, spread, min(limit, burst/10))
	}
}

// TestTheOperatorGrowsTheDirectory: the operator, watching one namespace,
// starts on a single webapp-directory that another process's entries fill
// past one part: it grows the directory into parts, keeps every entry found,
// and lists its own WebApp where LookupDirectory looks.
func TestTheOperatorGrowsTheDirectory(t *testing.T) {
	ctx := context.Background()
	ns, opNS := env.Namespace(t), env.Namespace(t)
	theirs := map[string]string{}
	for i := range 4000 {
		other, name := fmt.Sprintf("another-team-%02d-production", i%20), fmt.Sprintf("storefront-%05d-canary-eu-west-1", i)
		theirs[webapp.DirectoryKey(other, name)] = "http://" + name + "." + other + ".svc:8080"
	}
	if _, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Labels: map[string]string{
			webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory",
		}},
		Data: theirs,
	}, metav1.CreateOptions{FieldManager: webapp.FieldManager}); err != nil {
		t.Fatal(err)
	}
	operator.Start(t, env.Kubeconfig, "--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS, "--namespaces="+ns)
	w := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	want := maps.Clone(theirs)
	want[webapp.DirectoryKey(ns, "web")] = webapp.URL(w)
	size := 0
	for k, v := range want {
		size += len(k) + len(v)
	}
	parts := webapp.DirectoryPartsFor(size, 1)
	if parts < 2 {
		t.Fatalf("%d bytes: the test needs more than one part", size)
	}
	eventually(t, "the directory has its parts and lists the WebApp", func(ctx context.Context) (bool, error) {
		cm, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, found, err := webapp.LookupDirectory(ctx, kubeClient(t), opNS, ns, "web")
		return cm.Annotations[webapp.DirectoryPartsAnnotation] == fmt.Sprint(parts) && found, err
	})
	lookUpAll(t, snapshot(t, opNS), opNS, want, nil)
	got, _ := directoryParts(t, opNS, slices.Collect(maps.Keys(theirs))...)
	if got != parts {
		t.Errorf("P %d, want %d", got, parts)
	}
}
