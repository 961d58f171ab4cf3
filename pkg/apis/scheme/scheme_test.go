package scheme_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/apis/scheme"
)

func TestKindsBothWays(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		obj runtime.Object
		gvk schema.GroupVersionKind
	}{
		{&handrollv1.WebApp{}, schema.GroupVersionKind{Group: "handroll.dev", Version: "v1", Kind: "WebApp"}},
		{&handrollv1.WebAppList{}, schema.GroupVersionKind{Group: "handroll.dev", Version: "v1", Kind: "WebAppList"}},
		{&handrollv1alpha1.WebApp{}, schema.GroupVersionKind{Group: "handroll.dev", Version: "v1alpha1", Kind: "WebApp"}},
		{&handrollv1alpha1.WebAppList{}, schema.GroupVersionKind{Group: "handroll.dev", Version: "v1alpha1", Kind: "WebAppList"}},
		{&appsv1.Deployment{}, appsv1.SchemeGroupVersion.WithKind("Deployment")},
		{&corev1.Service{}, corev1.SchemeGroupVersion.WithKind("Service")},
		{&corev1.ConfigMap{}, corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		{&eventsv1.Event{}, eventsv1.SchemeGroupVersion.WithKind("Event")},
		{&coordinationv1.Lease{}, coordinationv1.SchemeGroupVersion.WithKind("Lease")},
	}
	for _, tc := range cases {
		got, err := scheme.KindFor(s, tc.obj)
		if err != nil {
			t.Errorf("KindFor(%T): %v", tc.obj, err)
			continue
		}
		if got != tc.gvk {
			t.Errorf("KindFor(%T) = %v, want %v", tc.obj, got, tc.gvk)
		}
		back, err := scheme.NewObject(s, tc.gvk)
		if err != nil {
			t.Errorf("NewObject(%v): %v", tc.gvk, err)
			continue
		}
		if gotType, wantType := reflectType(back), reflectType(tc.obj); gotType != wantType {
			t.Errorf("NewObject(%v) = %s, want %s", tc.gvk, gotType, wantType)
		}
	}

	// The handroll group's resource and kind helpers agree with the scheme.
	if gk := handrollv1.Kind(handrollv1.WebAppKind); gk != (schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}) {
		t.Errorf("Kind(WebApp) = %v", gk)
	}
	if gr := handrollv1.Resource(handrollv1.WebAppResource); gr != (schema.GroupResource{Group: "handroll.dev", Resource: "webapps"}) {
		t.Errorf("Resource(webapps) = %v", gr)
	}
}

// unregistered stands for a type someone forgot to add to the scheme.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object { c := *u; return &c }

func TestUnregisteredTypeErrorSaysWhatToDo(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = scheme.KindFor(s, &unregistered{})
	if err == nil {
		t.Fatal("KindFor accepted a type that is not registered")
	}
	if !runtime.IsNotRegisteredError(errors.Unwrap(err)) {
		t.Errorf("the error no longer wraps runtime's not-registered error: %v", err)
	}
	for _, want := range []string{"*scheme_test.unregistered", "not registered", "AddToScheme", "pkg/apis/scheme"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	gvk := schema.GroupVersionKind{Group: "handroll.dev", Version: "v9", Kind: "WebApp"}
	_, err = scheme.NewObject(s, gvk)
	if err == nil || !strings.Contains(err.Error(), "handroll.dev/v9, Kind=WebApp") {
		t.Errorf("NewObject(%v) error = %v, want one naming the kind", gvk, err)
	}
}

func TestNewReturnsIndependentSchemes(t *testing.T) {
	a, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "example.test", Version: "v1"}
	a.AddKnownTypes(gv, &unregistered{})
	if b.Recognizes(gv.WithKind("unregistered")) {
		t.Error("a type added to one scheme appeared in another: New shares state")
	}
}

// TestConvertsWebAppBetweenVersions converts the way a conversion webhook
// does: objects made by the scheme from the request's and the desired
// GroupVersionKind, decoded from JSON, converted with Convert.
func TestConvertsWebAppBetweenVersions(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	v1 := handrollv1.SchemeGroupVersion.WithKind(handrollv1.WebAppKind)
	v1alpha1 := handrollv1alpha1.SchemeGroupVersion.WithKind(handrollv1.WebAppKind)
	for _, tc := range []struct {
		from, to schema.GroupVersionKind
		in, want string
	}{{
		from: v1, to: v1alpha1,
		in:   `{"metadata":{"name":"shop","annotations":{"team":"a"}},"spec":{"image":"nginx","replicas":2,"port":9090,"config":{"k":"v"},"service":{"type":"NodePort","port":80}},"status":{"readyReplicas":1}}`,
		want: `{"metadata":{"name":"shop","annotations":{"handroll.dev/v1-spec":"{\"service\":{\"type\":\"NodePort\",\"port\":80}}","team":"a"}},"spec":{"image":"nginx","size":2,"containerPort":9090,"resources":{},"configData":{"k":"v"}},"status":{"observedGeneration":0,"readyReplicas":1}}`,
	}, {
		from: v1alpha1, to: v1,
		in:   `{"metadata":{"name":"shop","annotations":{"handroll.dev/v1-spec":"{\"configMapRef\":{\"name\":\"shared\"}}"}},"spec":{"image":"nginx","size":0,"containerPort":9090}}`,
		want: `{"metadata":{"name":"shop"},"spec":{"image":"nginx","replicas":0,"port":9090,"resources":{},"configMapRef":{"name":"shared"}},"status":{}}`,
	}} {
		in, err := scheme.NewObject(s, tc.from)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.in), in); err != nil {
			t.Fatal(err)
		}
		out, err := scheme.NewObject(s, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Convert(in, out, nil); err != nil {
			t.Fatalf("%s to %s: %v", tc.from.Version, tc.to.Version, err)
		}
		got, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s to %s:\n got %s\nwant %s", tc.from.Version, tc.to.Version, got, tc.want)
		}
	}
}

func reflectType(o runtime.Object) string { return fmt.Sprintf("%T", o) }
