package webapp

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
)

// applies runs one Reconcile and returns the resources it applied to.
func (u *upToDate) applies(t *testing.T) []string {
	t.Helper()
	u.kube.ClearActions()
	u.hr.ClearActions()
	// A child that moved may move the status too; what it writes is not
	// the question here.
	u.hr.PrependReactor("patch", "webapps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &handrollv1.WebApp{}, nil
	})
	if _, err := u.r.Reconcile(context.Background(), u.req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var out []string
	for _, a := range u.kube.Actions() {
		if a.GetVerb() == "patch" {
			out = append(out, a.GetResource().Resource)
		}
	}
	return out
}

// cached returns the object of type T that indexer holds under key.
func cached[T any](t *testing.T, indexer cache.Indexer, key string) T {
	t.Helper()
	obj, ok, err := indexer.GetByKey(key)
	if err != nil || !ok {
		t.Fatalf("%s not cached: %v", key, err)
	}
	return decoded[T](t, obj)
}

// decoded is what a lister hands out for obj, held by a children's cache.
func decoded[T any](t *testing.T, obj any) T {
	t.Helper()
	if c, ok := obj.(*handrollcache.Child); ok {
		var err error
		if obj, err = c.Object(); err != nil {
			t.Fatal(err)
		}
	}
	return obj.(T)
}

func TestVerifiedRemembersOnlyAnUnmovedVersion(t *testing.T) {
	u := newUpToDate(t)
	u.reconcile(t) // verifies every child
	if got := u.r.verified.len(); got != 1 {
		t.Fatalf("verified holds %d WebApps after an up-to-date reconcile, want 1", got)
	}

	// A hand edit moves the version (the API server moves the generation
	// of a change of spec): compared again, found, repaired.
	dep := cached[*appsv1.Deployment](t, u.deployments, "ns/shop").DeepCopy()
	dep.Spec.Template.Spec.Containers[0].Image = "edited:1"
	dep.ResourceVersion = "2001"
	dep.Generation++
	cacheChild(t, u.deployments, dep)
	if got := u.applies(t); len(got) != 1 || got[0] != "deployments" {
		t.Errorf("after a hand edit of the Deployment's image, applied %v, want [deployments]", got)
	}
}

func TestVerifiedComparesAgainOnNewInputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(u *upToDate, w *handrollv1.WebApp)
		want   []string
	}{{
		name: "new generation",
		change: func(_ *upToDate, w *handrollv1.WebApp) {
			w.Spec.Image = "nginx:1.28"
			w.Generation++
		},
		want: []string{"deployments"},
	}, {
		name: "the referenced ConfigMap's data",
		change: func(u *upToDate, _ *handrollv1.WebApp) {
			ref := cached[*corev1.ConfigMap](t, u.configMaps, "ns/shared").DeepCopy()
			ref.Data = map[string]string{"settings.yaml": "level: debug"}
			ref.ResourceVersion = "901"
			cacheChild(t, u.configMaps, ref)
		},
		want: []string{"deployments"},
	}, {
		// No API server wrote it: the generation says nothing.
		name: "a spec changed under generation 0",
		change: func(_ *upToDate, w *handrollv1.WebApp) {
			w.Generation = 0
			w.Spec.Image = "nginx:1.28"
		},
		want: []string{"deployments"},
	}, {
		name:   "nothing",
		change: func(*upToDate, *handrollv1.WebApp) {},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpToDate(t)
			u.reconcile(t)
			w := cached[*handrollv1.WebApp](t, u.webapps, "ns/shop").DeepCopy()
			tc.change(u, w)
			if err := u.webapps.Update(w); err != nil {
				t.Fatal(err)
			}
			if got := u.applies(t); !equalStrings(got, tc.want) {
				t.Errorf("applied %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVerifiedForgetsAWebAppGone(t *testing.T) {
	u := newUpToDate(t)
	u.reconcile(t)
	if err := u.webapps.Delete(cached[*handrollv1.WebApp](t, u.webapps, "ns/shop")); err != nil {
		t.Fatal(err)
	}
	u.reconcile(t)
	if got := u.r.verified.len(); got != 0 {
		t.Errorf("verified holds %d WebApps once the only one is gone, want 0", got)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAVerifiedChildStaysVerifiedThroughStatusAlone: a Deployment's
// version is its uid, generation and metadata, so a rollout's status
// writes keep it verified, and any change of what we set does not.
func TestAVerifiedChildStaysVerifiedThroughStatusAlone(t *testing.T) {
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name: "shop", Namespace: "ns", UID: "d-1", Generation: 3, ResourceVersion: "100",
			Labels:          map[string]string{"app": "shop", "tier": "web"},
			Annotations:     map[string]string{AnnotationAppliedHash: "abc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: "shop", UID: "w-1", Controller: ptr.To(true)}},
		}}
	}
	key := types.NamespacedName{Namespace: "ns", Name: "shop"}
	in := inputs{uid: "w-1", generation: 7}
	for _, tc := range []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{"a new status", func(d *appsv1.Deployment) { d.ResourceVersion = "101"; d.Status.ReadyReplicas = 2 }, true},
		{"the labels in another order", func(d *appsv1.Deployment) {
			d.ResourceVersion = "102"
			d.Labels = map[string]string{"tier": "web", "app": "shop"}
		}, true},
		{"a new generation (any change of spec)", func(d *appsv1.Deployment) { d.ResourceVersion = "103"; d.Generation++ }, false},
		{"a label edited", func(d *appsv1.Deployment) { d.ResourceVersion = "104"; d.Labels["tier"] = "db" }, false},
		{"a label moved to an annotation", func(d *appsv1.Deployment) {
			d.ResourceVersion = "105"
			delete(d.Labels, "tier")
			d.Annotations["tier"] = "web"
		}, false},
		{"an annotation removed", func(d *appsv1.Deployment) { d.ResourceVersion = "106"; delete(d.Annotations, AnnotationAppliedHash) }, false},
		{"the owner no longer its controller", func(d *appsv1.Deployment) { d.ResourceVersion = "107"; d.OwnerReferences[0].Controller = nil }, false},
		{"another object of the name (a restore)", func(d *appsv1.Deployment) { d.ResourceVersion = "108"; d.UID = "d-2" }, false},
		{"never written by an API server", func(d *appsv1.Deployment) { d.ResourceVersion = "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v verified
			v.record(key, in, slotDeployment, base())
			live := base()
			tc.change(live)
			if got := v.upToDate(key, in, slotDeployment, live); got != tc.want {
				t.Errorf("verified after %s: %v, want %v", tc.name, got, tc.want)
			}
		})
	}

	// A child without a generation (a Service) goes by its resourceVersion:
	// any write moves it.
	var v verified
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: "s-1", ResourceVersion: "200"}}
	v.record(key, in, slotService, svc)
	if !v.upToDate(key, in, slotService, svc) {
		t.Error("a Service at the version recorded is not verified")
	}
	moved := svc.DeepCopy()
	moved.ResourceVersion = "201"
	if v.upToDate(key, in, slotService, moved) {
		t.Error("a Service at a new resourceVersion is still verified")
	}
}
