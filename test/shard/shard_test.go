package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/handroll/handroll/pkg/shard"
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
	// And the selector is indeed ignored: range 0 of 1000 lists ConfigMaps
	// of namespaces outside it.
	ranges, _ := shard.Ranges(1000)
	list, err := client.Resource(configmaps).List(ctx, metav1.ListOptions{ShardSelector: ranges[0].Selector()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool { return shard.Of(u.GetNamespace(), 1000) != 0 }) {
		t.Errorf("without the gate the selector still filtered: %d ConfigMaps, all in range 0", len(list.Items))
	}
}

// TestSelectorSelectsTheRangesNamespaces: 24 namespaces, a WebApp, a
// Deployment, a Service and a ConfigMap in each; listing with each of 4 ranges' selectors returns the
// objects of exactly the namespaces shard.Of puts in that range, and a
// watch with a selector sees only those.
func TestSelectorSelectsTheRangesNamespaces(t *testing.T) {
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
	ours := map[string]bool{}
	for range 24 {
		ns := env.Namespace(t)
		ours[ns] = true
		want[shard.Of(ns, n)] = append(want[shard.Of(ns, n)], ns)
		create(t, client, ns)
	}
	for i := range want {
		slices.Sort(want[i])
	}
	// The test means nothing if every namespace falls in one range.
	if nonEmpty := slices.IndexFunc(want, func(s []string) bool { return len(s) == len(ours) }); nonEmpty >= 0 {
		t.Fatalf("all 24 namespaces hash into range %d", nonEmpty)
	}

	for _, r := range ranges {
		for _, res := range []schema.GroupVersionResource{webapps, deployments, services, configmaps} {
			list, err := client.Resource(res).List(ctx, metav1.ListOptions{ShardSelector: r.Selector(), LabelSelector: "shard-test=yes"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, item := range list.Items {
				if ours[item.GetNamespace()] {
					got = append(got, item.GetNamespace())
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want[r.Index]) {
				t.Errorf("%s in range %v: listed the namespaces %v, want %v", res.Resource, r, got, want[r.Index])
			}
		}
	}

	// A watch with range 0's selector sees updates in its namespaces only.
	w, err := client.Resource(configmaps).Watch(ctx, metav1.ListOptions{ShardSelector: ranges[0].Selector(), LabelSelector: "shard-test=yes"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ns := range ours {
		if _, err := client.Resource(configmaps).Namespace(ns).Patch(ctx, "data", "application/merge-patch+json", []byte(`{"data":{"touched":"yes"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for len(seen) < len(want[0]) {
		select {
		case ev := <-w.ResultChan():
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ours[obj.GetNamespace()] && shard.Of(obj.GetNamespace(), n) != 0 {
				t.Fatalf("the watch of range 0 delivered %s/%s, of range %d", obj.GetNamespace(), obj.GetName(), shard.Of(obj.GetNamespace(), n))
			}
			seen[obj.GetNamespace()] = true
		case <-deadline:
			t.Fatalf("the watch of range 0 delivered %d of its %d namespaces' updates", len(seen), len(want[0]))
		}
	}
}

func create(t *testing.T, client dynamic.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]any{"shard-test": "yes"}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "handroll.dev/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": "app", "labels": labels},
		"spec":     map[string]any{"image": "nginx:1.27"},
	}}
	if _, err := client.Resource(webapps).Namespace(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	sel := map[string]string{"app": "app"}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"shard-test": "yes"}},
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
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"shard-test": "yes"}},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	for res, o := range map[schema.GroupVersionResource]any{deployments: dep, services: svc} {
		obj, err := toUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Resource(res).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"shard-test": "yes"}}}
	obj, err := toUnstructured(cm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(configmaps).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", strings.TrimSpace(ns), err))
	}
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
