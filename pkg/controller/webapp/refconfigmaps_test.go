package webapp

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollfake "github.com/handroll/handroll/pkg/generated/clientset/versioned/fake"
	handrollinformers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
)

// TestRefConfigMapsReadsOnlyWhenTheVersionMoves: a referenced ConfigMap is
// fetched once per resourceVersion, and what is kept is what the config
// hash reads.
func TestRefConfigMapsReadsOnlyWhenTheVersionMoves(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "settings", ResourceVersion: "1",
			Annotations: map[string]string{"big": "annotation"}},
		Data: map[string]string{"k": "v1"},
	})
	refs := &RefConfigMaps{Kube: kube}
	gets := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}

	for range 3 {
		cm, err := refs.Get(ctx, "a", "settings", "1")
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["k"] != "v1" || len(cm.Annotations) != 0 {
			t.Fatalf("kept %+v", cm)
		}
	}
	if n := gets(); n != 1 {
		t.Fatalf("%d GETs for one resourceVersion; want 1", n)
	}

	cm, _ := kube.CoreV1().ConfigMaps("a").Get(ctx, "settings", metav1.GetOptions{})
	cm.Data["k"], cm.ResourceVersion = "v2", "2"
	if _, err := kube.CoreV1().ConfigMaps("a").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := refs.Get(ctx, "a", "settings", "2")
	if err != nil || got.Data["k"] != "v2" {
		t.Fatalf("after the change: %+v, %v", got, err)
	}

	if err := kube.CoreV1().ConfigMaps("a").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := refs.Get(ctx, "a", "settings", "3"); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted ConfigMap: %v", err)
	}
	if len(refs.held) != 0 {
		t.Errorf("a deleted ConfigMap is still held: %v", refs.held)
	}
}

// TestRefConfigMapsForgetsWhatNoWebAppNames: a held ConfigMap is dropped
// once no WebApp in the informers names it any more, whether the last one
// names another or is deleted, and kept while one still does.
func TestRefConfigMapsForgetsWhatNoWebAppNames(t *testing.T) {
	ctx := t.Context()
	withRef := func(name, ref string) *handrollv1.WebApp {
		w := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}, Spec: handrollv1.WebAppSpec{Image: "app:1"}}
		if ref != "" {
			w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: ref}
		}
		return w
	}
	// NewClientset's field-managed tracker needs an OpenAPI schema that the
	// generated fake does not carry for WebApps.
	hc := handrollfake.NewSimpleClientset(withRef("one", "shared"), withRef("two", "shared"), withRef("three", "own"))
	kube := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "shared", ResourceVersion: "1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "own", ResourceVersion: "1"}},
	)
	factory := handrollinformers.NewSharedInformerFactory(hc, 0)
	webapps := factory.Handroll().V1().WebApps().Informer()
	if err := AddIndexers(webapps); err != nil {
		t.Fatal(err)
	}
	refs := &RefConfigMaps{Kube: kube}
	if err := refs.WatchReferences([]cache.SharedIndexInformer{webapps}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() { close(stop); factory.Shutdown() }()
	factory.WaitForCacheSync(stop)
	for _, name := range []string{"shared", "own"} {
		if _, err := refs.Get(ctx, "a", name, "1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := refs.Held(); n != 2 {
		t.Fatalf("held %d ConfigMaps, want 2", n)
	}
	held := func(what string, want int) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return refs.Held() == want, nil
		})
		if err != nil {
			t.Fatalf("%s: held %d ConfigMaps, want %d", what, refs.Held(), want)
		}
	}
	webApps := hc.HandrollV1().WebApps("a")
	if _, err := webApps.Update(ctx, withRef("three", ""), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	held("after the only WebApp naming own stopped naming it", 1)
	if err := webApps.Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the informer's delete, which must keep shared
	held("after one of the two WebApps naming shared was deleted", 1)
	if err := webApps.Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held("after the last WebApp naming shared was deleted", 0)
}
