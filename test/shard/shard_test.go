package shard

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var (
	webapps     = schema.GroupVersionResource{Group: "handroll.dev", Version: "v1", Resource: "webapps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func dynamicClient(t *testing.T, cp *controlplane.ControlPlane) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerFiltersIsDetected(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ok, err := shard.ServerFilters(context.Background(), env.KubeClient(t), env.Namespace(t))
	if err != nil || !ok {
		t.Errorf("ServerFilters = %v, %v; want true with the gate on", ok, err)
	}
}

func TestServerWithoutTheGateIsDetected(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	plain := plainControlPlane(t)
	ctx := context.Background()
	client := dynamicClient(t, plain)
	ok, err := shard.ServerFilters(ctx, plain.KubeClient(t), "default")
	if err != nil || ok {
		t.Errorf("without the gate: ServerFilters = %v, %v; want false", ok, err)
	}
	// And the selector is indeed ignored: range 0 of 256 lists ConfigMaps
	// outside it.
	ranges, _ := shard.Ranges(256)
	list, err := client.Resource(configmaps).List(ctx, metav1.ListOptions{ShardSelector: ranges[0].Selector()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool { return shard.Of(u.GetUID(), 256) != 0 }) {
		t.Errorf("without the gate the selector still filtered: %d ConfigMaps, all in range 0", len(list.Items))
	}
}

// TestSelectorsSelectTheRangesWebAppsAndChildren: 24 WebApps in two
// namespaces, each with a Deployment, a Service and a ConfigMap labelled
// with its bucket, as the reconciler labels them. Listing with each of 4
// ranges' selectors returns exactly the WebApps shard.Of puts in that range
// (the uid selector) and exactly their children (the bucket label); a
// watch with a range's selectors sees only those.
func TestSelectorsSelectTheRangesWebAppsAndChildren(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ctx := context.Background()
	client := dynamicClient(t, env)
	const n = 4
	ranges, err := shard.Ranges(n)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]string, n)
	namespaces := []string{env.Namespace(t), env.Namespace(t)}
	for i := range 24 {
		ns, name := namespaces[i%2], fmt.Sprintf("app-%02d", i)
		uid := create(t, client, ns, name)
		want[shard.Of(uid, n)] = append(want[shard.Of(uid, n)], ns+"/"+name)
	}
	for i := range want {
		slices.Sort(want[i])
	}
	// The test means nothing if every WebApp falls in one range.
	if all := slices.IndexFunc(want, func(s []string) bool { return len(s) == 24 }); all >= 0 {
		t.Fatalf("all 24 WebApps hash into range %d", all)
	}

	for _, r := range ranges {
		for _, res := range []schema.GroupVersionResource{webapps, deployments, services, configmaps} {
			opts := metav1.ListOptions{LabelSelector: "shard-test=yes"}
			if res == webapps {
				opts.ShardSelector = r.Selector()
			} else {
				opts.LabelSelector += "," + r.ChildSelector()
			}
			list, err := client.Resource(res).List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, item := range list.Items {
				got = append(got, item.GetNamespace()+"/"+item.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want[r.Index]) {
				t.Errorf("%s in range %v: listed %v, want %v", res.Resource, r, got, want[r.Index])
			}
		}
	}

	// A watch with range 0's selectors sees updates of its objects only.
	for _, res := range []schema.GroupVersionResource{webapps, configmaps} {
		opts := metav1.ListOptions{LabelSelector: "shard-test=yes"}
		if res == webapps {
			opts.ShardSelector = ranges[0].Selector()
		} else {
			opts.LabelSelector += "," + ranges[0].ChildSelector()
		}
		w, err := client.Resource(res).Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 24 {
			ns, name := namespaces[i%2], fmt.Sprintf("app-%02d", i)
			if _, err := client.Resource(res).Namespace(ns).Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		deadline := time.After(budget.Scale(20 * time.Second))
		for len(seen) < len(want[0]) {
			select {
			case ev := <-w.ResultChan():
				obj, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				key := obj.GetNamespace() + "/" + obj.GetName()
				if !slices.Contains(want[0], key) {
					t.Fatalf("the watch of %s in range 0 delivered %s, of another range", res.Resource, key)
				}
				seen[key] = true
			case <-deadline:
				t.Fatalf("the watch of %s in range 0 delivered %d of its %d objects' updates", res.Resource, len(seen), len(want[0]))
			}
		}
		w.Stop()
	}
}

// create makes a WebApp name in ns, and a Deployment, a Service and a
// ConfigMap of the same name labelled with its bucket; it returns the
// WebApp's uid.
func create(t *testing.T, client dynamic.Interface, ns, name string) types.UID {
	t.Helper()
	ctx := context.Background()
	labels := map[string]any{"shard-test": "yes"}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "handroll.dev/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"image": "nginx:1.27"},
	}}
	created, err := client.Resource(webapps).Namespace(ns).Create(ctx, app, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	childLabels := map[string]string{"shard-test": "yes", shard.BucketLabel: shard.Bucket(created.GetUID())}
	one := int32(1)
	sel := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: childLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: childLabels},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: childLabels}}
	for res, o := range map[schema.GroupVersionResource]any{deployments: dep, services: svc, configmaps: cm} {
		obj, err := toUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Resource(res).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(fmt.Errorf("%s %s/%s: %w", res.Resource, ns, name, err))
		}
	}
	return created.GetUID()
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
