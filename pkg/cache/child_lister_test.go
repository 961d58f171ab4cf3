package cache

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestChildListerDecodes: the children's listers hand out typed objects
// whether the cache holds a Child or a trimmed object, select by the labels
// a Child keeps encoded, and answer NotFound as the generated listers do.
func TestChildListerDecodes(t *testing.T) {
	deployment := func(ns, name, tier string, owned bool) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7", Labels: map[string]string{"tier": tier}},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		}
		if owned {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: name, UID: "u-" + k8stypes.UID(name), Controller: ptr.To(true)}}
		}
		return d
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, d := range []*appsv1.Deployment{
		deployment("a", "web", "front", true),
		deployment("a", "api", "back", true),
		deployment("a", "plain", "front", false),
		deployment("b", "web", "front", true),
	} {
		obj, err := CompactChild(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, packed := obj.(*Child); packed != (len(d.OwnerReferences) > 0) {
			t.Fatalf("%s/%s cached as a %T", d.Namespace, d.Name, obj)
		}
		if err := indexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	in := func(ns string) childLister[*appsv1.Deployment] {
		return childLister[*appsv1.Deployment]{indexer, ns, appsv1.Resource("deployments")}
	}

	got, err := in("a").Get("web")
	if err != nil || got.Name != "web" || got.Namespace != "a" || *got.Spec.Replicas != 2 || got.Labels["tier"] != "front" {
		t.Errorf("Get(web) = %+v, %v", got, err)
	}
	if _, err := in("a").Get("gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(gone): %v, want NotFound", err)
	}
	names := func(ds []*appsv1.Deployment) map[string]bool {
		out := map[string]bool{}
		for _, d := range ds {
			out[d.Namespace+"/"+d.Name] = true
		}
		return out
	}
	front := labels.SelectorFromSet(labels.Set{"tier": "front"})
	for _, tc := range []struct {
		ns   string
		sel  labels.Selector
		want []string
	}{
		{"a", front, []string{"a/web", "a/plain"}},
		{"a", labels.Everything(), []string{"a/web", "a/api", "a/plain"}},
		{metav1.NamespaceAll, front, []string{"a/web", "a/plain", "b/web"}},
	} {
		list, err := in(tc.ns).List(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		got := names(list)
		if len(got) != len(tc.want) {
			t.Errorf("List(%q, %s) = %v, want %v", tc.ns, tc.sel, got, tc.want)
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("List(%q, %s) = %v, want %v", tc.ns, tc.sel, got, tc.want)
			}
		}
	}
}
