package restmapper

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	clientgomapper "k8s.io/client-go/restmapper"

	handrollmapper "github.com/handroll/handroll/pkg/restmapper"
)

var webApp = schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}

// want is an expected mapping in both directions.
type want struct {
	gvk   schema.GroupVersionKind
	gvr   schema.GroupVersionResource
	scope meta.RESTScopeName
}

func (w want) check(m meta.RESTMapper) error {
	var errs []error
	for _, versions := range [][]string{{w.gvk.Version}, nil} {
		got, err := m.RESTMapping(w.gvk.GroupKind(), versions...)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("RESTMapping(%v, %q): %w", w.gvk.GroupKind(), versions, err))
		case got.GroupVersionKind != w.gvk || got.Resource != w.gvr || got.Scope.Name() != w.scope:
			errs = append(errs, fmt.Errorf("RESTMapping(%v, %q) = %v %v %s; want %v %v %s", w.gvk.GroupKind(), versions,
				got.GroupVersionKind, got.Resource, got.Scope.Name(), w.gvk, w.gvr, w.scope))
		}
	}
	for _, in := range []schema.GroupVersionResource{w.gvr, w.gvr.GroupResource().WithVersion("")} {
		if got, err := m.KindFor(in); err != nil || got != w.gvk {
			errs = append(errs, fmt.Errorf("KindFor(%v) = %v, %v; want %v", in, got, err, w.gvk))
		}
		if got, err := m.ResourceFor(in); err != nil || got != w.gvr {
			errs = append(errs, fmt.Errorf("ResourceFor(%v) = %v, %v; want %v", in, got, err, w.gvr))
		}
	}
	return errors.Join(errs...)
}

var builtinsAndWebApp = []want{
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, meta.RESTScopeNameNamespace},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, meta.RESTScopeNameNamespace},
	{schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, meta.RESTScopeNameNamespace},
	{schema.GroupVersionKind{Group: "handroll.dev", Version: "v1", Kind: "WebApp"}, schema.GroupVersionResource{Group: "handroll.dev", Version: "v1", Resource: "webapps"}, meta.RESTScopeNameNamespace},
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, meta.RESTScopeNameRoot},
	{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, meta.RESTScopeNameRoot},
}

// TestBuiltinAndWebAppMappings: kinds to resources and back, with scope, as
// the real API server's discovery describes them.
func TestBuiltinAndWebAppMappings(t *testing.T) {
	testContext(t)
	m, _ := newMapper(t, handrollmapper.Options{})
	for _, w := range builtinsAndWebApp {
		if err := w.check(m); err != nil {
			t.Error(err)
		}
	}

	// Names from the CRD: short name and singular.
	for _, name := range []string{"wa", "webapp", "WebApps"} {
		in := schema.GroupVersionResource{Group: "handroll.dev", Resource: name}
		if got, err := m.KindFor(in); err != nil || got != webApp.WithVersion("v1") {
			t.Errorf("KindFor(%v) = %v, %v; want handroll.dev/v1 WebApp", in, got, err)
		}
	}
	if got, err := m.ResourceSingularizer("webapps"); err != nil || got != "webapp" {
		t.Errorf(`ResourceSingularizer("webapps") = %q, %v; want "webapp"`, got, err)
	}

	// Subresources are reached through their parent, never mapped alone.
	if got, err := m.KindFor(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments/scale"}); !meta.IsNoMatchError(err) {
		t.Errorf("KindFor(deployments/scale) = %v, %v; want a no-match error", got, err)
	}
	if got, err := m.RESTMapping(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}); !meta.IsNoMatchError(err) {
		t.Errorf("RESTMapping(autoscaling Scale) = %v, %v; want a no-match error: Scale is only a subresource", got, err)
	}
}

// TestAgreesWithClientGo maps every resource the server serves with both
// this mapper and client-go's DeferredDiscoveryRESTMapper, and compares.
func TestAgreesWithClientGo(t *testing.T) {
	testContext(t)
	ours, _ := newMapper(t, handrollmapper.Options{})
	dc, err := discovery.NewDiscoveryClientForConfig(newCounter().config())
	if err != nil {
		t.Fatal(err)
	}
	theirs := clientgomapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		gvk   schema.GroupVersionKind
		gvr   schema.GroupVersionResource
		scope meta.RESTScopeName
		err   string
	}
	mapping := func(m *meta.RESTMapping, err error) answer {
		if err != nil {
			return answer{err: fmt.Sprintf("%T", err)}
		}
		return answer{gvk: m.GroupVersionKind, gvr: m.Resource, scope: m.Scope.Name()}
	}
	compared := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
			for _, versions := range [][]string{{gv.Version}, nil} {
				a, b := mapping(ours.RESTMapping(gk, versions...)), mapping(theirs.RESTMapping(gk, versions...))
				if a != b {
					t.Errorf("RESTMapping(%v, %q): ours %+v, client-go's %+v", gk, versions, a, b)
				}
			}
			gvr := gv.WithResource(r.Name)
			a, errA := ours.KindFor(gvr)
			b, errB := theirs.KindFor(gvr)
			if a != b || (errA == nil) != (errB == nil) {
				t.Errorf("KindFor(%v): ours %v, %v; client-go's %v, %v", gvr, a, errA, b, errB)
			}
			if gv.Group != "" { // an empty group means "any group" to client-go
				partial := schema.GroupVersionResource{Group: gv.Group, Resource: r.Name}
				a, errA := ours.ResourceFor(partial)
				b, errB := theirs.ResourceFor(partial)
				if a != b || (errA == nil) != (errB == nil) {
					t.Errorf("ResourceFor(%v): ours %v, %v; client-go's %v, %v", partial, a, errA, b, errB)
				}
			}
			compared++
		}
	}
	if compared < 50 {
		t.Errorf("compared %d resources; a kube-apiserver serves more than 50", compared)
	}
	t.Logf("compared %d resources", compared)
}

// TestLazyDiscovery counts the requests of a first WebApp lookup: the group
// list and handroll.dev/v1, nothing about the other groups.
func TestLazyDiscovery(t *testing.T) {
	testContext(t)
	m, c := newMapper(t, handrollmapper.Options{})
	if got := c.requests(); len(got) != 0 {
		t.Errorf("New made requests %q; want none", got)
	}
	if _, err := m.RESTMapping(webApp, "v1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"/api", "/apis", "/apis/handroll.dev/v1"}
	if got := c.requests(); !slices.Equal(got, want) {
		t.Errorf("first WebApp lookup requested %q; want %q", got, want)
	}
	if ct := c.contentType("/apis"); strings.Contains(ct, "APIGroupDiscoveryList") {
		t.Errorf("/apis answered %q: the aggregated document, with every resource of every group", ct)
	}
	for range 10 {
		if _, err := m.RESTMapping(webApp, "v1"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.KindFor(schema.GroupVersionResource{Group: "handroll.dev", Resource: "webapps"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.requests(); len(got) != len(want) {
		t.Errorf("repeated lookups made more requests: %q", got[len(want):])
	}

	// What the server has, and what client-go's deferred mapper fetches
	// for the same lookup, for comparison.
	dc, err := discovery.NewDiscoveryClientForConfig(newCounter().config())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	groupVersions := 0
	for _, g := range groups.Groups {
		groupVersions += len(g.Versions)
	}
	if groupVersions <= len(want) {
		t.Errorf("the server serves %d group-versions; the laziness check needs more than %d", groupVersions, len(want))
	}
	deferredCounter := newCounter()
	deferredClient, err := discovery.NewDiscoveryClientForConfig(deferredCounter.config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientgomapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(deferredClient)).RESTMapping(webApp, "v1"); err != nil {
		t.Fatal(err)
	}
	ourRequests, ourBytes := c.totals()
	theirRequests, theirBytes := deferredCounter.totals()
	t.Logf("server: %d groups, %d group-versions; first WebApp lookup: ours %d requests, %d bytes; client-go's deferred mapper %d requests, %d bytes",
		len(groups.Groups), groupVersions, ourRequests, ourBytes, theirRequests, theirBytes)
	if ourBytes >= theirBytes {
		t.Errorf("ours read %d bytes of discovery, client-go's deferred mapper %d; lazy discovery should read less", ourBytes, theirBytes)
	}
}

// TestCRDInstalledAfterStart: a kind whose CRD appears after the mapper was
// created and used is found by the same mapper.
func TestCRDInstalledAfterStart(t *testing.T) {
	ctx := testContext(t)
	m, _ := newMapper(t, handrollmapper.Options{})
	if _, err := m.RESTMapping(webApp); err != nil {
		t.Fatal(err)
	}
	late := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	if got, err := m.RESTMapping(late, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping(%v) before its CRD = %v, %v; want a no-match error", late, got, err)
	}

	installCRD(ctx, t, crd(late.Group, late.Kind, "lates", apiextensionsv1.ClusterScoped, "v1"))

	w := want{late.WithVersion("v1"), schema.GroupVersionResource{Group: late.Group, Version: "v1", Resource: "lates"}, meta.RESTScopeNameRoot}
	eventually(ctx, t, "the late CRD's kind maps", func() error { return w.check(m) })
}

// TestDeletedCRDStopsMapping: once a CRD, or one of its versions, is gone,
// lookups say no match instead of answering from old data.
func TestDeletedCRDStopsMapping(t *testing.T) {
	ctx := testContext(t)
	gone := schema.GroupKind{Group: "gone.example.com", Kind: "Gone"}
	c := crd(gone.Group, gone.Kind, "gones", apiextensionsv1.NamespaceScoped, "v1", "v2")
	installCRD(ctx, t, c)

	// One mapper whose data ages fast, one with the defaults, reset by hand.
	aging, _ := newMapper(t, handrollmapper.Options{MaxAge: 500 * time.Millisecond})
	defaults, _ := newMapper(t, handrollmapper.Options{})
	for _, m := range []*handrollmapper.Mapper{aging, defaults} {
		eventually(ctx, t, "the CRD's kind maps in v1 and v2", func() error {
			_, err1 := m.RESTMapping(gone, "v1")
			_, err2 := m.RESTMapping(gone, "v2")
			return errors.Join(err1, err2)
		})
	}

	// v1 is dropped from the CRD (v2 is the stored version).
	client := crdClient(t)
	cur, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = cur.Spec.Versions[1:]
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing v1 from the CRD: %v", err)
	}
	eventually(ctx, t, "the removed version stops mapping", func() error {
		if got, err := aging.RESTMapping(gone, "v1"); !meta.IsNoMatchError(err) {
			return fmt.Errorf("RESTMapping(%v, v1) = %v, %v; want a no-match error", gone, got, err)
		}
		return nil
	})
	if got, err := aging.RESTMapping(gone); err != nil || got.Resource.Version != "v2" {
		t.Errorf("RESTMapping(%v) with v1 removed = %v, %v; want v2", gone, got, err)
	}

	deleteCRD(ctx, t, c.Name)
	eventually(ctx, t, "the deleted CRD's kind stops mapping", func() error {
		if got, err := aging.RESTMapping(gone); !meta.IsNoMatchError(err) {
			return fmt.Errorf("RESTMapping(%v) = %v, %v; want a no-match error", gone, got, err)
		}
		if got, err := aging.KindFor(schema.GroupVersionResource{Group: gone.Group, Resource: "gones"}); !meta.IsNoMatchError(err) {
			return fmt.Errorf("KindFor(gones) = %v, %v; want a no-match error", got, err)
		}
		return nil
	})
	eventually(ctx, t, "after Reset, the deleted CRD's kind stops mapping", func() error {
		meta.MaybeResetRESTMapper(defaults)
		if got, err := defaults.RESTMapping(gone, "v2"); !meta.IsNoMatchError(err) {
			return fmt.Errorf("RESTMapping(%v, v2) = %v, %v; want a no-match error", gone, got, err)
		}
		return nil
	})
	// The rest of the mapper is untouched.
	if err := builtinsAndWebApp[3].check(aging); err != nil {
		t.Error(err)
	}
}

// TestConcurrentLookupsWhileACRDIsAdded: 64 goroutines look up built-in
// kinds, the WebApp and a kind whose CRD is installed while they run. The
// built-in lookups never fail, every goroutine ends up seeing the new kind,
// and the misses before it appeared cost no more requests than the refresh
// rate limit allows.
func TestConcurrentLookupsWhileACRDIsAdded(t *testing.T) {
	ctx := testContext(t)
	const goroutines = 64
	m, c := newMapper(t, handrollmapper.Options{})
	added := want{
		schema.GroupVersionKind{Group: "concurrent.example.com", Version: "v1", Kind: "Added"},
		schema.GroupVersionResource{Group: "concurrent.example.com", Version: "v1", Resource: "addeds"},
		meta.RESTScopeNameNamespace,
	}
	stable := builtinsAndWebApp[:4]

	start := time.Now()
	var wg sync.WaitGroup
	var lookups, misses atomic.Int64
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				for _, w := range stable {
					got, err := m.RESTMapping(w.gvk.GroupKind(), w.gvk.Version)
					lookups.Add(1)
					if err != nil || got.Resource != w.gvr || got.Scope.Name() != w.scope {
						errs <- fmt.Errorf("RESTMapping(%v) = %v, %v; want %v", w.gvk, got, err, w.gvr)
						return
					}
				}
				got, err := m.RESTMapping(added.gvk.GroupKind(), added.gvk.Version)
				lookups.Add(1)
				switch {
				case meta.IsNoMatchError(err):
					misses.Add(1)
				case err != nil:
					errs <- err
					return
				case got.Resource != added.gvr || got.Scope.Name() != added.scope:
					errs <- fmt.Errorf("RESTMapping(%v) = %v %s; want %v %s", added.gvk, got.Resource, got.Scope.Name(), added.gvr, added.scope)
					return
				default:
					return // seen
				}
			}
			errs <- fmt.Errorf("never saw %v: %w", added.gvk, ctx.Err())
		})
	}
	time.Sleep(300 * time.Millisecond) // let them miss for a while
	installCRD(ctx, t, crd(added.gvk.Group, added.gvk.Kind, added.gvr.Resource, apiextensionsv1.NamespaceScoped, "v1"))
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// First fetches: the group list (2 requests) and five group-versions.
	// Each refresh: the group list and at most the one group-version of the
	// new group. Refreshes: the burst, then the rate over the elapsed time.
	refreshes := handrollmapper.DefaultRefreshBurst + int(math.Ceil(float64(handrollmapper.DefaultRefreshRate)*elapsed.Seconds()))
	limit := 2 + 5 + 3*refreshes
	requests, _ := c.totals()
	t.Logf("%d goroutines, %v: %d lookups (%d misses), %d discovery requests (limit %d)",
		goroutines, elapsed.Round(time.Millisecond), lookups.Load(), misses.Load(), requests, limit)
	if requests > limit {
		t.Errorf("%d discovery requests in %v; the refresh rate limit allows at most %d", requests, elapsed, limit)
	}
	if misses.Load() < goroutines {
		t.Errorf("only %d misses: the goroutines did not look up before the CRD existed, so the test proved nothing", misses.Load())
	}
}
