package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

// served is a WebApp as the API server sends it, with managedFields and
// the last-applied annotation.
func served(name string) handrollv1.WebApp {
	now := metav1.Now()
	return handrollv1.WebApp{
		TypeMeta: metav1.TypeMeta{APIVersion: "handroll.dev/v1", Kind: "WebApp"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "7",
			Annotations: map[string]string{lastApplied: `{"spec":{}}`, "keep": "me"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
				Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:image":{}}}`)}}},
		Spec:   handrollv1.WebAppSpec{Image: "web:1", Config: map[string]string{"managedFields": "kept"}},
		Status: handrollv1.WebAppStatus{ReadyReplicas: 1},
	}
}

// webAppServer serves a list of two WebApps, and a watch stream of two
// events, as the API server does.
func webAppServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/handroll.dev/v1/namespaces/ns/webapps" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		if r.URL.Query().Get("watch") != "true" {
			_ = enc.Encode(handrollv1.WebAppList{TypeMeta: metav1.TypeMeta{APIVersion: "handroll.dev/v1", Kind: "WebAppList"},
				ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []handrollv1.WebApp{served("a"), served("b")}})
			return
		}
		for i, typ := range []watch.EventType{watch.Added, watch.Modified} {
			obj, _ := json.Marshal(served(fmt.Sprint("w", i)))
			_ = enc.Encode(metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: obj}})
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// checkStripped: w has lost managedFields and the annotation, nothing else.
func checkStripped(t *testing.T, w *handrollv1.WebApp) {
	t.Helper()
	if w.ManagedFields != nil || w.Annotations[lastApplied] != "" {
		t.Errorf("%s kept managedFields or the last-applied annotation: %+v", w.Name, w.ObjectMeta)
	}
	if w.Annotations["keep"] != "me" || w.Spec.Image != "web:1" || w.Spec.Config["managedFields"] != "kept" || w.Status.ReadyReplicas != 1 {
		t.Errorf("%s lost more: %+v", w.Name, w)
	}
}

// TestInformerClientStrips: the informers' client lists and watches WebApps
// without managedFields and the last-applied annotation, through the real
// REST client; the client it was made from decodes them whole.
func TestInformerClientStrips(t *testing.T) {
	cfg := &rest.Config{Host: webAppServer(t).URL}
	whole, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := InformerClient(cfg, whole)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.HandrollV1().WebApps("ns").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	for i := range list.Items {
		checkStripped(t, &list.Items[i])
	}
	w, err := c.HandrollV1().WebApps("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 2 {
		e := <-w.ResultChan()
		app, ok := e.Object.(*handrollv1.WebApp)
		if !ok {
			t.Fatalf("watch event %s: %T %+v", e.Type, e.Object, e.Object)
		}
		checkStripped(t, app)
	}
	if full, err := whole.HandrollV1().WebApps("ns").List(ctx, metav1.ListOptions{}); err != nil || full.Items[0].ManagedFields == nil {
		t.Errorf("the writes' client stripped too: %v", err)
	}
}
