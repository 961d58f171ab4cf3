package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/apis/scheme"
)

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var meta = metav1.ObjectMeta{Name: "shop", Namespace: "team", UID: "6a2b", ResourceVersion: "42", Generation: 3}

func withAnnotations(m metav1.ObjectMeta, annotations map[string]string) metav1.ObjectMeta {
	m.Annotations = annotations
	return m
}

var status = handrollv1.WebAppStatus{
	ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 1,
	Selector: "app.kubernetes.io/name=shop", URL: "http://shop.team.svc:80",
	Conditions: []metav1.Condition{{
		Type: handrollv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 3,
		LastTransitionTime: metav1.Unix(1700000000, 0), Reason: "Progressing", Message: "1 of 2 replicas ready",
	}},
}

var alphaStatus = v1alpha1.WebAppStatus{
	ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 1,
	Selector: "app.kubernetes.io/name=shop", URL: "http://shop.team.svc:80",
	Conditions: []metav1.Condition{{
		Type: handrollv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 3,
		LastTransitionTime: metav1.Unix(1700000000, 0), Reason: "Progressing", Message: "1 of 2 replicas ready",
	}},
}

var (
	env       = []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
)

// TestConversionBothWays converts each v1 object to v1alpha1, compares the
// result with the expected v1alpha1 object, and converts it back. cmp.Diff
// tells nil from empty, so a map or slice that changes between the two
// fails here even where the JSON would not show it.
func TestConversionBothWays(t *testing.T) {
	s := newScheme(t)
	for _, tc := range conversionCases {
		t.Run(tc.name, func(t *testing.T) {
			v1In := tc.v1.DeepCopy()
			var alpha v1alpha1.WebApp
			if err := s.Convert(v1In, &alpha, nil); err != nil {
				t.Fatalf("v1 to v1alpha1: %v", err)
			}
			if diff := cmp.Diff(&tc.alpha, &alpha); diff != "" {
				t.Errorf("v1 to v1alpha1 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&tc.v1, v1In); diff != "" {
				t.Errorf("converting changed its input (-before +after):\n%s", diff)
			}

			alphaIn := tc.alpha.DeepCopy()
			var v1 handrollv1.WebApp
			if err := s.Convert(alphaIn, &v1, nil); err != nil {
				t.Fatalf("v1alpha1 to v1: %v", err)
			}
			want := tc.v1.DeepCopy()
			if len(tc.v1.Annotations) == 0 && len(tc.alpha.Annotations) > 0 {
				// v1 had no annotations and v1alpha1 only ours: the map
				// that held it is left empty. Nil and empty encode alike.
				want.Annotations = map[string]string{}
			}
			if diff := cmp.Diff(want, &v1); diff != "" {
				t.Errorf("v1alpha1 to v1 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&tc.alpha, alphaIn); diff != "" {
				t.Errorf("converting changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// conversionCase is a v1 object and the v1alpha1 object it converts to
// and back from.
type conversionCase struct {
	name  string
	v1    handrollv1.WebApp
	alpha v1alpha1.WebApp
}

// conversionCases are TestConversionBothWays's cases.
var conversionCases = []conversionCase{{
	name: "every field: renamed fields, shared fields, v1-only fields in the annotation, other annotations kept, status carried",
	v1: handrollv1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{"team": "payments"}),
		Spec: handrollv1.WebAppSpec{
			Image: "nginx:1.27", Replicas: ptr.To[int32](2), Port: ptr.To[int32](9090), Env: env, Resources: resources,
			Config:       map[string]string{"app.yaml": "greeting: hello"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "shared"},
			Service:      &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](80), NodePort: 30080},
		},
		Status: status,
	},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{
			"team":                    "payments",
			v1alpha1.V1SpecAnnotation: `{"configMapRef":{"name":"shared"},"service":{"type":"NodePort","port":80,"nodePort":30080}}`,
		}),
		Spec: v1alpha1.WebAppSpec{
			Image: "nginx:1.27", Size: ptr.To[int32](2), ContainerPort: ptr.To[int32](9090), Env: env, Resources: resources,
			ConfigData: map[string]string{"app.yaml": "greeting: hello"},
		},
		Status: alphaStatus,
	},
}, {
	name:  "nothing v1alpha1 lacks: no annotation, and nil annotations stay nil",
	v1:    handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](1), Port: ptr.To[int32](8080)}},
	alpha: v1alpha1.WebApp{ObjectMeta: meta, Spec: v1alpha1.WebAppSpec{Image: "nginx", Size: ptr.To[int32](1), ContainerPort: ptr.To[int32](8080)}},
}, {
	name:  "empty annotations stay empty",
	v1:    handrollv1.WebApp{ObjectMeta: withAnnotations(meta, map[string]string{}), Spec: handrollv1.WebAppSpec{Image: "nginx"}},
	alpha: v1alpha1.WebApp{ObjectMeta: withAnnotations(meta, map[string]string{}), Spec: v1alpha1.WebAppSpec{Image: "nginx"}},
}, {
	name:  "nil and zero size are different requests",
	v1:    handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](0)}},
	alpha: v1alpha1.WebApp{ObjectMeta: meta, Spec: v1alpha1.WebAppSpec{Image: "nginx", Size: ptr.To[int32](0)}},
}, {
	name: "empty env, config and resource lists stay empty, not nil",
	v1: handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{
		Image: "nginx", Env: []corev1.EnvVar{}, Config: map[string]string{},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Claims: []corev1.ResourceClaim{}},
	}},
	alpha: v1alpha1.WebApp{ObjectMeta: meta, Spec: v1alpha1.WebAppSpec{
		Image: "nginx", Env: []corev1.EnvVar{}, ConfigData: map[string]string{},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Claims: []corev1.ResourceClaim{}},
	}},
}, {
	// Validation refuses them, but conversion must not turn a given
	// zero into a field left out, which would then get the default.
	name: "explicit zero ports and empty service type are kept, not left out",
	v1: handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{
		Image: "nginx", Port: ptr.To[int32](0),
		Service: &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType](""), Port: ptr.To[int32](0)},
	}},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: `{"service":{"type":"","port":0}}`}),
		Spec:       v1alpha1.WebAppSpec{Image: "nginx", ContainerPort: ptr.To[int32](0)},
	},
}, {
	name: "an empty service is not an absent one",
	v1:   handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "nginx", Service: &handrollv1.WebAppService{}}},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: `{"service":{}}`}),
		Spec:       v1alpha1.WebAppSpec{Image: "nginx"},
	},
}, {
	name: "an empty configMapRef is not an absent one",
	v1:   handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "nginx", ConfigMapRef: &handrollv1.ConfigMapReference{}}},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: `{"configMapRef":{"name":""}}`}),
		Spec:       v1alpha1.WebAppSpec{Image: "nginx"},
	},
}, {
	name: "a defaulted v1 object, as the API server stores it",
	v1: handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{
		Image: "nginx", Replicas: ptr.To[int32](1), Port: ptr.To[int32](8080),
		Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](80)},
	}},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: `{"service":{"type":"ClusterIP","port":80}}`}),
		Spec:       v1alpha1.WebAppSpec{Image: "nginx", Size: ptr.To[int32](1), ContainerPort: ptr.To[int32](8080)},
	},
}, {
	name: "characters JSON escapes survive",
	v1: handrollv1.WebApp{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{
		Image: "nginx", ConfigMapRef: &handrollv1.ConfigMapReference{Name: `<"a&b"\ü>`},
	}},
	alpha: v1alpha1.WebApp{
		ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: `{"configMapRef":{"name":"\u003c\"a\u0026b\"\\ü\u003e"}}`}),
		Spec:       v1alpha1.WebAppSpec{Image: "nginx"},
	},
}}

// TestV1ObjectsDoNotOwnTheAnnotation: a v1 object holding the annotation
// itself (set by hand, or left over) must not have that value read back as
// v1-only fields: converting to v1alpha1 replaces it with what the object
// really holds, or removes it.
func TestV1ObjectsDoNotOwnTheAnnotation(t *testing.T) {
	s := newScheme(t)
	stale := `{"configMapRef":{"name":"old"}}`
	for _, tc := range []struct {
		name string
		spec handrollv1.WebAppSpec
		want map[string]string
	}{
		{"nothing to carry", handrollv1.WebAppSpec{Image: "nginx"}, map[string]string{"keep": "me"}},
		{"a service to carry", handrollv1.WebAppSpec{Image: "nginx", Service: &handrollv1.WebAppService{Port: ptr.To[int32](81)}},
			map[string]string{"keep": "me", v1alpha1.V1SpecAnnotation: `{"service":{"port":81}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &handrollv1.WebApp{
				ObjectMeta: withAnnotations(meta, map[string]string{"keep": "me", v1alpha1.V1SpecAnnotation: stale}),
				Spec:       tc.spec,
			}
			var alpha v1alpha1.WebApp
			if err := s.Convert(in, &alpha, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, alpha.Annotations); diff != "" {
				t.Errorf("v1alpha1 annotations (-want +got):\n%s", diff)
			}
			if in.Annotations[v1alpha1.V1SpecAnnotation] != stale {
				t.Error("converting changed the v1 object's annotations")
			}
			var back handrollv1.WebApp
			if err := s.Convert(&alpha, &back, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.spec, back.Spec); diff != "" {
				t.Errorf("spec after the round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMalformedAnnotationIsAnError(t *testing.T) {
	s := newScheme(t)
	for _, tc := range []struct {
		value string
		cause string // a piece of the decoder's message
	}{
		{"", "unexpected end of JSON input"},
		{"not json", "invalid character"},
		{`{"service":{"port":"80"}}`, "cannot unmarshal string"},
		{`{"service":{"port":99999999999}}`, "cannot unmarshal number"},
		{`{"service":{}} {}`, "invalid character"},
		{`{"services":{}}`, `unknown field "services"`},
		{`{"Service":{}}`, `unknown field "Service"`},
		{`{"service":{"port":80},"service":{"port":81}}`, `duplicate field "service"`},
		{`{"configMapRef":{"name":"a","namespace":"b"}}`, `unknown field "configMapRef.namespace"`},
		{`[]`, "cannot unmarshal array"},
		{`"{}"`, "cannot unmarshal string"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			in := &v1alpha1.WebApp{
				ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: tc.value}),
				Spec:       v1alpha1.WebAppSpec{Image: "nginx"},
			}
			var out handrollv1.WebApp
			err := s.Convert(in, &out, nil)
			if err == nil {
				t.Fatalf("converted with the annotation %q: spec %+v, annotations %v", tc.value, out.Spec, out.Annotations)
			}
			for _, want := range []string{"team/shop", v1alpha1.V1SpecAnnotation, tc.cause} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestEmptyAnnotationValues: values that decode to nothing are accepted and
// restore nothing. The annotation is not written back, since conversion
// from v1 writes it only when there is something to carry.
func TestEmptyAnnotationValues(t *testing.T) {
	s := newScheme(t)
	for _, value := range []string{`{}`, `null`, ` {"service": null} `} {
		in := &v1alpha1.WebApp{
			ObjectMeta: withAnnotations(meta, map[string]string{v1alpha1.V1SpecAnnotation: value, "keep": "me"}),
			Spec:       v1alpha1.WebAppSpec{Image: "nginx"},
		}
		var out handrollv1.WebApp
		if err := s.Convert(in, &out, nil); err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if out.Spec.ConfigMapRef != nil || out.Spec.Service != nil {
			t.Errorf("%q restored %+v, %+v", value, out.Spec.ConfigMapRef, out.Spec.Service)
		}
		if diff := cmp.Diff(map[string]string{"keep": "me"}, out.Annotations); diff != "" {
			t.Errorf("%q: annotations (-want +got):\n%s", value, diff)
		}
	}
}

// TestConvertingIntoAUsedObject: the scheme may be handed an object that
// already holds values; fields the source does not have must not survive.
func TestConvertingIntoAUsedObject(t *testing.T) {
	s := newScheme(t)
	out := &handrollv1.WebApp{Spec: handrollv1.WebAppSpec{
		ConfigMapRef: &handrollv1.ConfigMapReference{Name: "stale"},
		Service:      &handrollv1.WebAppService{Port: ptr.To[int32](1)},
	}}
	if err := s.Convert(&v1alpha1.WebApp{ObjectMeta: meta, Spec: v1alpha1.WebAppSpec{Image: "nginx"}}, out, nil); err != nil {
		t.Fatal(err)
	}
	if out.Spec.ConfigMapRef != nil || out.Spec.Service != nil {
		t.Errorf("stale v1-only fields survived: %+v, %+v", out.Spec.ConfigMapRef, out.Spec.Service)
	}
}

func TestListConversionConvertsEachItem(t *testing.T) {
	s := newScheme(t)
	in := &handrollv1.WebAppList{
		ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items: []handrollv1.WebApp{
			{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "a", Service: &handrollv1.WebAppService{Port: ptr.To[int32](81)}}},
			{ObjectMeta: meta, Spec: handrollv1.WebAppSpec{Image: "b", Replicas: ptr.To[int32](4)}},
		},
	}
	var alpha v1alpha1.WebAppList
	if err := s.Convert(in, &alpha, nil); err != nil {
		t.Fatal(err)
	}
	if alpha.ResourceVersion != "7" || len(alpha.Items) != 2 ||
		alpha.Items[0].Annotations[v1alpha1.V1SpecAnnotation] != `{"service":{"port":81}}` ||
		alpha.Items[1].Spec.Size == nil || *alpha.Items[1].Spec.Size != 4 {
		t.Fatalf("unexpected list: %+v", alpha)
	}
	var back handrollv1.WebAppList
	if err := s.Convert(&alpha, &back, nil); err != nil {
		t.Fatal(err)
	}
	if back.Items[0].Spec.Service == nil || ptr.Deref(back.Items[0].Spec.Service.Port, 0) != 81 || *back.Items[1].Spec.Replicas != 4 {
		t.Errorf("round trip of the list lost fields: %+v", back)
	}
}
