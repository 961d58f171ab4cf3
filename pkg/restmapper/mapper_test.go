package restmapper

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// unlimited lets every refresh through, so that a test sees what the mapper
// asks for rather than what the limiter allows.
func unlimited() *rate.Limiter { return rate.NewLimiter(rate.Inf, 0) }

func newMapper(t *testing.T, f *fakeDiscovery, opts Options) *Mapper {
	t.Helper()
	m, err := New(f, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// mapping is a RESTMapping in a form cmp can compare (RESTScope is an
// interface of unexported types).
type mapping struct {
	GVK   schema.GroupVersionKind
	GVR   schema.GroupVersionResource
	Scope meta.RESTScopeName
}

func flat(m *meta.RESTMapping) mapping {
	return mapping{GVK: m.GroupVersionKind, GVR: m.Resource, Scope: m.Scope.Name()}
}

func ns(gv schema.GroupVersion, kind, resource string) mapping {
	return mapping{GVK: gv.WithKind(kind), GVR: gv.WithResource(resource), Scope: meta.RESTScopeNameNamespace}
}

func cluster(gv schema.GroupVersion, kind, resource string) mapping {
	return mapping{GVK: gv.WithKind(kind), GVR: gv.WithResource(resource), Scope: meta.RESTScopeNameRoot}
}

func TestNewNeedsAClient(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("New(nil) returned no error")
	}
}

func TestRESTMapping(t *testing.T) {
	m := newMapper(t, standardFake(), Options{RefreshLimiter: unlimited()})
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		versions []string
		want     mapping
	}{
		{"no version: the preferred one", schema.GroupKind{Group: "apps", Kind: "Deployment"}, nil, ns(appsV1, "Deployment", "deployments")},
		{"explicit version", schema.GroupKind{Group: "apps", Kind: "Deployment"}, []string{"v1"}, ns(appsV1, "Deployment", "deployments")},
		{"core group", schema.GroupKind{Kind: "ConfigMap"}, []string{"v1"}, ns(coreV1, "ConfigMap", "configmaps")},
		{"cluster-scoped core kind", schema.GroupKind{Kind: "Namespace"}, nil, cluster(coreV1, "Namespace", "namespaces")},
		{"cluster-scoped kind in a group", schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, nil, cluster(rbacV1, "ClusterRole", "clusterroles")},
		{"Lease", schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, []string{"v1"}, ns(coordinationV1, "Lease", "leases")},
		{"custom kind, preferred version", schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, nil, ns(handrollV1, "WebApp", "webapps")},
		{"custom kind, older version asked for", schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, []string{"v1alpha1"}, ns(handrollV1alpha, "WebApp", "webapps")},
		{"first served version of those asked for", schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, []string{"v9", "v1alpha1", "v1"}, ns(handrollV1alpha, "WebApp", "webapps")},
		{"empty and internal versions are ignored", schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, []string{"", "__internal"}, ns(handrollV1, "WebApp", "webapps")},
		{"kind only in a non-preferred version", schema.GroupKind{Group: "handroll.dev", Kind: "LegacyApp"}, nil, ns(handrollV1alpha, "LegacyApp", "legacyapps")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.RESTMapping(tc.gk, tc.versions...)
			if err != nil {
				t.Fatalf("RESTMapping(%v, %q): %v", tc.gk, tc.versions, err)
			}
			if diff := cmp.Diff(tc.want, flat(got)); diff != "" {
				t.Errorf("RESTMapping(%v, %q) (-want +got):\n%s", tc.gk, tc.versions, diff)
			}
		})
	}

	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		versions []string
	}{
		{"a subresource's kind is not a mapping", schema.GroupKind{Group: "apps", Kind: "Scale"}, nil},
		{"a subresource's kind, in the custom group", schema.GroupKind{Group: "handroll.dev", Kind: "Scale"}, nil},
		{"a version the server does not serve", schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, []string{"v9"}},
		{"a version that lacks the kind", schema.GroupKind{Group: "handroll.dev", Kind: "LegacyApp"}, []string{"v1"}},
		{"the empty group is the core group, not any group", schema.GroupKind{Kind: "Deployment"}, nil},
		{"an unknown group", schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}, nil},
		{"kinds are case-sensitive", schema.GroupKind{Group: "apps", Kind: "deployment"}, nil},
		{"the List kind is not guessed", schema.GroupKind{Group: "apps", Kind: "DeploymentList"}, nil},
		{"no kind", schema.GroupKind{Group: "apps"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.RESTMapping(tc.gk, tc.versions...)
			var noKind *meta.NoKindMatchError
			if !errors.As(err, &noKind) {
				t.Fatalf("RESTMapping(%v, %q) = %v, %s; want a NoKindMatchError", tc.gk, tc.versions, got, describe(err))
			}
			if noKind.GroupKind != tc.gk || !slices.Equal(noKind.SearchedVersions, tc.versions) {
				t.Errorf("error names %v %q; want %v %q", noKind.GroupKind, noKind.SearchedVersions, tc.gk, tc.versions)
			}
		})
	}
}

func TestRESTMappingReturnsACopy(t *testing.T) {
	m := newMapper(t, standardFake(), Options{})
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	first, err := m.RESTMapping(gk)
	if err != nil {
		t.Fatal(err)
	}
	first.Resource.Resource = "changed"
	first.Scope = meta.RESTScopeRoot
	second, err := m.RESTMapping(gk)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ns(appsV1, "Deployment", "deployments"), flat(second)); diff != "" {
		t.Errorf("a caller's change to a returned mapping leaked into the mapper (-want +got):\n%s", diff)
	}
}

func TestRESTMappings(t *testing.T) {
	m := newMapper(t, standardFake(), Options{RefreshLimiter: unlimited()})
	webapp := schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}
	for _, tc := range []struct {
		gk       schema.GroupKind
		versions []string
		want     []mapping
	}{
		{webapp, nil, []mapping{ns(handrollV1, "WebApp", "webapps"), ns(handrollV1alpha, "WebApp", "webapps")}},
		{webapp, []string{"v1alpha1", "v1"}, []mapping{ns(handrollV1alpha, "WebApp", "webapps"), ns(handrollV1, "WebApp", "webapps")}},
		{webapp, []string{"v9", "v1"}, []mapping{ns(handrollV1, "WebApp", "webapps")}},
		{schema.GroupKind{Group: "handroll.dev", Kind: "LegacyApp"}, nil, []mapping{ns(handrollV1alpha, "LegacyApp", "legacyapps")}},
	} {
		got, err := m.RESTMappings(tc.gk, tc.versions...)
		if err != nil {
			t.Fatalf("RESTMappings(%v, %q): %v", tc.gk, tc.versions, err)
		}
		var flatGot []mapping
		for _, g := range got {
			flatGot = append(flatGot, flat(g))
		}
		if diff := cmp.Diff(tc.want, flatGot); diff != "" {
			t.Errorf("RESTMappings(%v, %q) (-want +got):\n%s", tc.gk, tc.versions, diff)
		}
	}
	if got, err := m.RESTMappings(schema.GroupKind{Group: "handroll.dev", Kind: "Nope"}); !meta.IsNoMatchError(err) {
		t.Errorf("RESTMappings of a missing kind = %v, %s; want a no-match error", got, describe(err))
	}
}

func TestKindForAndResourceFor(t *testing.T) {
	m := newMapper(t, standardFake(), Options{RefreshLimiter: unlimited()})
	for _, tc := range []struct {
		in      schema.GroupVersionResource
		wantGVK schema.GroupVersionKind
		wantGVR schema.GroupVersionResource
	}{
		{appsV1.WithResource("deployments"), appsV1.WithKind("Deployment"), appsV1.WithResource("deployments")},
		{schema.GroupVersionResource{Group: "apps", Resource: "deployment"}, appsV1.WithKind("Deployment"), appsV1.WithResource("deployments")},
		{schema.GroupVersionResource{Group: "apps", Resource: "deploy"}, appsV1.WithKind("Deployment"), appsV1.WithResource("deployments")},
		{schema.GroupVersionResource{Resource: "PODS"}, coreV1.WithKind("Pod"), coreV1.WithResource("pods")},
		{schema.GroupVersionResource{Version: "v1", Resource: "po"}, coreV1.WithKind("Pod"), coreV1.WithResource("pods")},
		{schema.GroupVersionResource{Version: "__internal", Resource: "configmaps"}, coreV1.WithKind("ConfigMap"), coreV1.WithResource("configmaps")},
		{schema.GroupVersionResource{Group: "handroll.dev", Resource: "webapps"}, handrollV1.WithKind("WebApp"), handrollV1.WithResource("webapps")},
		{handrollV1alpha.WithResource("wa"), handrollV1alpha.WithKind("WebApp"), handrollV1alpha.WithResource("webapps")},
		{schema.GroupVersionResource{Group: "handroll.dev", Resource: "legacyapp"}, handrollV1alpha.WithKind("LegacyApp"), handrollV1alpha.WithResource("legacyapps")},
		// No singular in discovery: guessed from the kind.
		{schema.GroupVersionResource{Group: "old.example.com", Resource: "widget"}, oldV1.WithKind("Widget"), oldV1.WithResource("widgets")},
	} {
		gvk, err := m.KindFor(tc.in)
		if err != nil || gvk != tc.wantGVK {
			t.Errorf("KindFor(%v) = %v, %v; want %v", tc.in, gvk, err, tc.wantGVK)
		}
		gvr, err := m.ResourceFor(tc.in)
		if err != nil || gvr != tc.wantGVR {
			t.Errorf("ResourceFor(%v) = %v, %v; want %v", tc.in, gvr, err, tc.wantGVR)
		}
	}

	webapps := schema.GroupVersionResource{Group: "handroll.dev", Resource: "webapps"}
	kinds, err := m.KindsFor(webapps)
	if want := []schema.GroupVersionKind{handrollV1.WithKind("WebApp"), handrollV1alpha.WithKind("WebApp")}; err != nil || !slices.Equal(kinds, want) {
		t.Errorf("KindsFor(%v) = %v, %v; want %v (preferred version first)", webapps, kinds, err, want)
	}
	gvrs, err := m.ResourcesFor(webapps)
	if want := []schema.GroupVersionResource{handrollV1.WithResource("webapps"), handrollV1alpha.WithResource("webapps")}; err != nil || !slices.Equal(gvrs, want) {
		t.Errorf("ResourcesFor(%v) = %v, %v; want %v (preferred version first)", webapps, gvrs, err, want)
	}

	for _, in := range []schema.GroupVersionResource{
		{Resource: "deployments"}, // the core group only
		{Group: "apps", Resource: "deployments/scale"},
		{Group: "apps", Version: "v1", Resource: "deployments/status"},
		{Group: "handroll.dev", Version: "v9", Resource: "webapps"},
		{Group: "nope.example.com", Resource: "nopes"},
	} {
		var noResource *meta.NoResourceMatchError
		if gvk, err := m.KindFor(in); !errors.As(err, &noResource) || noResource.PartialResource != in {
			t.Errorf("KindFor(%v) = %v, %s; want a NoResourceMatchError for it", in, gvk, describe(err))
		}
		if gvr, err := m.ResourceFor(in); !meta.IsNoMatchError(err) {
			t.Errorf("ResourceFor(%v) = %v, %s; want a no-match error", in, gvr, describe(err))
		}
		if gvks, err := m.KindsFor(in); !meta.IsNoMatchError(err) {
			t.Errorf("KindsFor(%v) = %v, %s; want a no-match error", in, gvks, describe(err))
		}
		if gvrs, err := m.ResourcesFor(in); !meta.IsNoMatchError(err) {
			t.Errorf("ResourcesFor(%v) = %v, %s; want a no-match error", in, gvrs, describe(err))
		}
	}
	if _, err := m.KindFor(schema.GroupVersionResource{Group: "apps", Version: "v1"}); err == nil || meta.IsNoMatchError(err) {
		t.Errorf("KindFor without a resource: %s; want an error that is not a no-match", describe(err))
	}
}

func TestResourceSingularizer(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})

	// A bare name: not fetched yet, so the core group is asked.
	if got, err := m.ResourceSingularizer("pods"); err != nil || got != "pod" {
		t.Errorf(`ResourceSingularizer("pods") = %q, %v; want "pod"`, got, err)
	}
	// Not core, and handroll.dev not fetched yet: no match, input returned.
	got, err := m.ResourceSingularizer("WebApps")
	if !meta.IsNoMatchError(err) || got != "WebApps" {
		t.Errorf(`before handroll.dev is fetched, ResourceSingularizer("WebApps") = %q, %s; want "WebApps" and a no-match error`, got, describe(err))
	}

	if _, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"webapps": "webapp",
		"WebApps": "webapp",
		"wa":      "webapp",
		"webapp":  "webapp",
		"events":  "event", // in core and events.k8s.io, which agree
	} {
		if got, err := m.ResourceSingularizer(in); err != nil || got != want {
			t.Errorf("ResourceSingularizer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}

	// Two groups that disagree on the singular: an error, as in client-go.
	f.serve(schema.GroupVersion{Group: "a.example.com", Version: "v1"}, true, res("things", "thing", "Thing", true))
	f.serve(schema.GroupVersion{Group: "b.example.com", Version: "v1"}, true, res("things", "thingy", "Thing", true))
	for _, g := range []string{"a.example.com", "b.example.com"} {
		if _, err := m.RESTMapping(schema.GroupKind{Group: g, Kind: "Thing"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := m.ResourceSingularizer("things"); err == nil || got != "things" {
		t.Errorf(`ResourceSingularizer("things") = %q, %v; want "things" and an error: the groups disagree`, got, err)
	}
}

// TestLazy counts the requests: the group list once, then only the
// group-versions lookups need, each once.
func TestLazy(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})
	expect := func(step string, wantGroups int, wantGVs map[string]int) {
		t.Helper()
		groups, gvs := f.calls()
		if groups != wantGroups || !maps.Equal(gvs, wantGVs) {
			t.Errorf("%s: requests: group list %d, group-versions %v; want %d, %v", step, groups, gvs, wantGroups, wantGVs)
		}
	}
	expect("after New", 0, map[string]int{})

	webapp := schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}
	if _, err := m.RESTMapping(webapp, "v1"); err != nil {
		t.Fatal(err)
	}
	expect("first WebApp lookup", 1, map[string]int{"handroll.dev/v1": 1})

	for range 10 {
		if _, err := m.RESTMapping(webapp, "v1"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.KindFor(handrollV1.WithResource("webapps")); err != nil {
			t.Fatal(err)
		}
	}
	expect("repeated WebApp lookups", 1, map[string]int{"handroll.dev/v1": 1})

	// Unversioned: the preferred version has it, so v1alpha1 is not fetched.
	if _, err := m.RESTMapping(webapp); err != nil {
		t.Fatal(err)
	}
	expect("unversioned WebApp lookup", 1, map[string]int{"handroll.dev/v1": 1})

	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		t.Fatal(err)
	}
	expect("a second group", 1, map[string]int{"handroll.dev/v1": 1, "apps/v1": 1})

	// All versions: now v1alpha1 is needed, once.
	for range 3 {
		if _, err := m.RESTMappings(webapp); err != nil {
			t.Fatal(err)
		}
	}
	expect("all WebApp versions", 1, map[string]int{"handroll.dev/v1": 1, "apps/v1": 1, "handroll.dev/v1alpha1": 1})
}

// TestMissRefreshes: a kind, a version or a group that appears after the
// mapper has fetched is found by the next lookup for it.
func TestMissRefreshes(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})
	late := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(late); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping(%v) before its CRD = %s; want a no-match error", late, describe(err))
	}
	groups, _ := f.calls()
	if groups != 2 {
		t.Errorf("the miss asked for the group list %d times in all; want 2 (the first fetch and one refresh)", groups)
	}

	t.Run("a new group", func(t *testing.T) {
		f.serve(lateV1, true, res("lates", "late", "Late", false))
		got, err := m.RESTMapping(late)
		if err != nil {
			t.Fatalf("RESTMapping(%v) after its CRD: %v", late, err)
		}
		if diff := cmp.Diff(cluster(lateV1, "Late", "lates"), flat(got)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("a new kind in a fetched group-version", func(t *testing.T) {
		f.serve(handrollV1, true, res("webapps", "webapp", "WebApp", true, "wa"), res("gadgets", "gadget", "Gadget", true))
		got, err := m.KindFor(handrollV1.WithResource("gadgets"))
		if err != nil || got != handrollV1.WithKind("Gadget") {
			t.Errorf("KindFor(gadgets) = %v, %v; want %v", got, err, handrollV1.WithKind("Gadget"))
		}
	})
	t.Run("a new version", func(t *testing.T) {
		v2 := schema.GroupVersion{Group: "handroll.dev", Version: "v2"}
		f.serve(v2, false, res("webapps", "webapp", "WebApp", true, "wa"))
		got, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, "v2")
		if err != nil {
			t.Fatalf("RESTMapping(WebApp, v2): %v", err)
		}
		if diff := cmp.Diff(ns(v2, "WebApp", "webapps"), flat(got)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestMissesAreRateLimited(t *testing.T) {
	missing := schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}
	for _, tc := range []struct {
		name    string
		limiter *rate.Limiter
		want    int // refreshes for 50 misses
	}{
		{"a burst of 2, then one an hour", rate.NewLimiter(rate.Every(time.Hour), 2), 2},
		{"unlimited", unlimited(), 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := standardFake()
			m := newMapper(t, f, Options{RefreshLimiter: tc.limiter})
			if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
				t.Fatal(err)
			}
			for range 50 {
				if _, err := m.RESTMapping(missing); !meta.IsNoMatchError(err) {
					t.Fatalf("RESTMapping(%v) = %s; want a no-match error", missing, describe(err))
				}
			}
			if groups, _ := f.calls(); groups-1 != tc.want {
				t.Errorf("50 misses refreshed the group list %d times; want %d", groups-1, tc.want)
			}
		})
	}
}

func TestFirstFetchesAreNotRateLimited(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: rate.NewLimiter(0, 0)}) // refuses every refresh
	for _, gk := range []schema.GroupKind{{Group: "handroll.dev", Kind: "WebApp"}, {Group: "apps", Kind: "Deployment"}, {Kind: "Pod"}} {
		if _, err := m.RESTMapping(gk); err != nil {
			t.Errorf("RESTMapping(%v) with every refresh refused: %v; first fetches must not need the limiter", gk, err)
		}
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}); !meta.IsNoMatchError(err) {
		t.Errorf("a miss with every refresh refused: %s; want a no-match error", describe(err))
	}
	if groups, _ := f.calls(); groups != 1 {
		t.Errorf("group list asked for %d times; want 1: the miss's refresh was refused", groups)
	}
}

// TestOldDataIsFetchedAgain: data past MaxAge is fetched again by the next
// lookup that uses it, so deleted kinds and versions stop mapping and a new
// preferred version takes over.
func TestOldDataIsFetchedAgain(t *testing.T) {
	f := standardFake()
	f.serve(lateV1, true, res("lates", "late", "Late", false))
	clock := clocktesting.NewFakePassiveClock(time.Now())
	m := newMapper(t, f, Options{RefreshLimiter: unlimited(), MaxAge: time.Minute, Clock: clock})
	late := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	webapp := schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}
	for _, gk := range []schema.GroupKind{late, webapp} {
		if _, err := m.RESTMappings(gk); err != nil {
			t.Fatal(err)
		}
	}

	// The CRD is deleted, and another loses its v1alpha1; v2 becomes
	// preferred.
	f.remove(lateV1)
	f.remove(handrollV1alpha)
	v2 := schema.GroupVersion{Group: "handroll.dev", Version: "v2"}
	f.serve(v2, true, res("webapps", "webapp", "WebApp", true, "wa"))

	// Within MaxAge the fetched data answers: a hit does not ask discovery.
	before := f.totalCalls()
	clock.SetTime(clock.Now().Add(59 * time.Second))
	if _, err := m.RESTMapping(late); err != nil {
		t.Errorf("within MaxAge, RESTMapping(%v) = %v; want the fetched mapping", late, err)
	}
	if after := f.totalCalls(); after != before {
		t.Errorf("a hit within MaxAge made %d requests; want none", after-before)
	}

	clock.SetTime(clock.Now().Add(2 * time.Second))
	if got, err := m.RESTMapping(late); !meta.IsNoMatchError(err) {
		t.Errorf("past MaxAge, RESTMapping(%v) of a deleted CRD = %v, %s; want a no-match error", late, got, describe(err))
	}
	if got, err := m.RESTMapping(webapp, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Errorf("past MaxAge, RESTMapping(WebApp, v1alpha1) of a removed version = %v, %s; want a no-match error", got, describe(err))
	}
	got, err := m.RESTMapping(webapp)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ns(v2, "WebApp", "webapps"), flat(got)); diff != "" {
		t.Errorf("past MaxAge, the new preferred version (-want +got):\n%s", diff)
	}
	// Nothing of the deleted group-versions is kept.
	m.mu.RLock()
	for _, gv := range []schema.GroupVersion{lateV1, handrollV1alpha} {
		if m.gvs[gv] != nil || m.groups.serves(gv) {
			t.Errorf("%s is still held after the server stopped serving it", gv)
		}
	}
	m.mu.RUnlock()
}

// TestOldDataAnswersWhenItCannotBeFetched: a refresh of old data that fails,
// or that the limiter refuses, leaves the old data answering.
func TestOldDataAnswersWhenItCannotBeFetched(t *testing.T) {
	f := standardFake()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	limiter := rate.NewLimiter(rate.Every(time.Hour), 2)
	m := newMapper(t, f, Options{RefreshLimiter: limiter, MaxAge: time.Minute, Clock: clock})
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if _, err := m.RESTMapping(deployment); err != nil {
		t.Fatal(err)
	}
	f.setGVErr("apps/v1", unavailable)
	clock.SetTime(clock.Now().Add(2 * time.Minute))
	if got, err := m.RESTMapping(deployment); err != nil || got.Resource != appsV1.WithResource("deployments") {
		t.Errorf("old data whose refresh failed: RESTMapping = %v, %v; want the old mapping", got, err)
	}
	_, gvs := f.calls()
	if gvs["apps/v1"] != 2 {
		t.Errorf("apps/v1 asked for %d times; want 2 (the refresh was tried)", gvs["apps/v1"])
	}
	// The limiter's two tokens are spent (the group list and apps/v1 were
	// refreshed); the next refresh is refused, and the old data answers.
	f.setGVErr("apps/v1", nil)
	if got, err := m.RESTMapping(deployment); err != nil || got.Resource != appsV1.WithResource("deployments") {
		t.Errorf("old data whose refresh was refused: RESTMapping = %v, %v; want the old mapping", got, err)
	}
	if _, gvs := f.calls(); gvs["apps/v1"] != 2 {
		t.Errorf("apps/v1 asked for %d times; want still 2 (the limiter refused)", gvs["apps/v1"])
	}
}

func TestDiscoveryErrors(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})
	webapp := schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}

	f.setGroupsErr(unavailable)
	_, err := m.RESTMapping(webapp)
	if err == nil || meta.IsNoMatchError(err) || !errors.Is(err, unavailable) {
		t.Errorf("group list failing: %s; want the discovery error, not a no-match", describe(err))
	}
	f.setGroupsErr(nil)

	f.setGVErr("handroll.dev/v1", unavailable)
	if _, err = m.RESTMapping(webapp); err == nil || meta.IsNoMatchError(err) || !errors.Is(err, unavailable) {
		t.Errorf("group-version failing: %s; want the discovery error, not a no-match", describe(err))
	}
	f.setGVErr("handroll.dev/v1", nil)

	// Errors are not remembered: the next lookup asks again.
	if _, err = m.RESTMapping(webapp); err != nil {
		t.Errorf("after discovery recovered: %v", err)
	}

	// A miss whose refresh fails says why, rather than "no match".
	f.setGroupsErr(unavailable)
	if _, err = m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}); err == nil || !errors.Is(err, unavailable) {
		t.Errorf("a miss whose refresh failed: %s; want the discovery error", describe(err))
	}
	// ... while hits still answer from what was fetched.
	if _, err = m.RESTMapping(webapp); err != nil {
		t.Errorf("a hit while discovery fails: %v", err)
	}
}

func TestReset(t *testing.T) {
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: rate.NewLimiter(0, 0)})
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if _, err := m.RESTMapping(deployment); err != nil {
		t.Fatal(err)
	}
	f.remove(appsV1)
	if _, err := m.RESTMapping(deployment); err != nil {
		t.Errorf("before Reset, the fetched mapping answers: %v", err)
	}
	meta.MaybeResetRESTMapper(m)
	if _, err := m.RESTMapping(deployment); !meta.IsNoMatchError(err) {
		t.Errorf("after Reset, a deleted kind = %s; want a no-match error", describe(err))
	}
	if groups, gvs := f.calls(); groups != 2 || gvs["apps/v1"] != 1 {
		t.Errorf("requests: group list %d, apps/v1 %d; want 2 and 1 (fetched again after Reset, and apps/v1 no longer listed)", groups, gvs["apps/v1"])
	}
}

// waitFor polls cond, so that a test can line goroutines up behind a fetch;
// it gives up after a while and lets the test's assertions fail.
func waitFor(cond func() bool) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !cond(); {
		time.Sleep(time.Millisecond)
	}
}

// TestConcurrentFirstLookupsShareOneFetch: 50 goroutines start on a new
// mapper at once; the group list and the group-version are fetched once.
func TestConcurrentFirstLookupsShareOneFetch(t *testing.T) {
	const n = 50
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})
	f.setOnGroups(func(int) { waitFor(func() bool { return m.waiting(flightKey{op: opGroups}) == n-1 }) })

	errs := lookupAll(n, func() error {
		got, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, "v1")
		if err == nil && got.Resource != handrollV1.WithResource("webapps") {
			err = errors.New("wrong mapping " + got.Resource.String())
		}
		return err
	})
	for _, err := range errs {
		t.Error(err)
	}
	if groups, gvs := f.calls(); groups != 1 || !maps.Equal(gvs, map[string]int{"handroll.dev/v1": 1}) {
		t.Errorf("%d concurrent first lookups: group list %d, group-versions %v; want one fetch of each", n, groups, gvs)
	}
}

// TestConcurrentMissesShareOneRefresh: 50 goroutines miss at once in the
// same group; with no rate limit, only the collapsing keeps it to one
// refresh.
func TestConcurrentMissesShareOneRefresh(t *testing.T) {
	const n = 50
	f := standardFake()
	m := newMapper(t, f, Options{RefreshLimiter: unlimited()})
	if _, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, "v1"); err != nil {
		t.Fatal(err)
	}
	refresh := flightKey{op: opRefresh, gv: schema.GroupVersion{Group: "handroll.dev"}}
	f.setOnGroups(func(call int) {
		if call == 2 {
			waitFor(func() bool { return m.waiting(refresh) == n-1 })
		}
	})

	missing := schema.GroupKind{Group: "handroll.dev", Kind: "Missing"}
	errs := lookupAll(n, func() error {
		if _, err := m.RESTMapping(missing, "v1"); !meta.IsNoMatchError(err) {
			return errors.New("want a no-match error, got " + describe(err))
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if groups, gvs := f.calls(); groups != 2 || gvs["handroll.dev/v1"] != 2 {
		t.Errorf("%d concurrent misses: group list %d, handroll.dev/v1 %d; want 2 and 2 (the first fetch and one shared refresh)", n, groups, gvs["handroll.dev/v1"])
	}
}

// lookupAll runs fn in n goroutines at once and returns their errors.
func lookupAll(n int, fn func() error) []error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			if err := fn(); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// TestConcurrentLookupsWhileDiscoveryChanges is for -race: lookups of many
// kinds from many goroutines while CRDs come and go and data ages.
func TestConcurrentLookupsWhileDiscoveryChanges(t *testing.T) {
	f := standardFake()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	m := newMapper(t, f, Options{MaxAge: time.Second, Clock: clock})
	late := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	stable := map[schema.GroupKind]schema.GroupVersionResource{
		{Group: "apps", Kind: "Deployment"}:           appsV1.WithResource("deployments"),
		{Kind: "ConfigMap"}:                           coreV1.WithResource("configmaps"),
		{Group: "coordination.k8s.io", Kind: "Lease"}: coordinationV1.WithResource("leases"),
		{Group: "handroll.dev", Kind: "WebApp"}:       handrollV1.WithResource("webapps"),
	}

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				f.serve(lateV1, true, res("lates", "late", "Late", false))
			} else {
				f.remove(lateV1)
			}
			clock.SetTime(clock.Now().Add(300 * time.Millisecond))
			time.Sleep(time.Millisecond)
		}
	})

	errs := lookupAll(64, func() error {
		for i := range 200 {
			for gk, want := range stable {
				got, err := m.RESTMapping(gk)
				if err != nil {
					return err
				}
				if got.Resource != want {
					return errors.New("wrong mapping " + got.Resource.String())
				}
			}
			switch got, err := m.RESTMapping(late); {
			case meta.IsNoMatchError(err):
			case err != nil:
				return err
			case got.Resource != lateV1.WithResource("lates") || got.Scope.Name() != meta.RESTScopeNameRoot:
				return errors.New("wrong mapping " + got.Resource.String())
			}
			if i%50 == 0 {
				if _, err := m.ResourceSingularizer("webapps"); err != nil && !meta.IsNoMatchError(err) {
					return err
				}
			}
		}
		return nil
	})
	close(stop)
	churn.Wait()
	for _, err := range errs {
		t.Error(err)
	}
}

// TestDiscoveryClientUsesThePlainGroupList runs the mapper over client-go's
// real DiscoveryClient and checks that it asks for the plain group list, not
// the aggregated document with every resource of every group.
func TestDiscoveryClientUsesThePlainGroupList(t *testing.T) {
	var mu sync.Mutex
	accept := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accept[r.URL.Path] = r.Header.Get("Accept")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
		case "/apis":
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"handroll.dev",` +
				`"versions":[{"groupVersion":"handroll.dev/v1","version":"v1"}],"preferredVersion":{"groupVersion":"handroll.dev/v1","version":"v1"}}]}`))
		case "/apis/handroll.dev/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"handroll.dev/v1","resources":[` +
				`{"name":"webapps","singularName":"webapp","namespaced":true,"kind":"WebApp","verbs":["get"],"shortNames":["wa"]}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	client, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.RESTMapping(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ns(handrollV1, "WebApp", "webapps"), flat(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/api", "/apis"} {
		if a, ok := accept[path]; !ok || strings.Contains(a, "APIGroupDiscoveryList") {
			t.Errorf("GET %s with Accept %q; want the plain format only", path, a)
		}
	}
	if _, ok := accept["/apis/handroll.dev/v1"]; !ok || len(accept) != 3 {
		t.Errorf("requested %v; want /api, /apis and /apis/handroll.dev/v1", slices.Sorted(maps.Keys(accept)))
	}
}
