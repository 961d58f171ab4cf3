package webapp

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
