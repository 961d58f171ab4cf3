package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// TestDefaultsMatchTheGoDefaulter checks the CRD's schema defaults against
// both the documented values and handrollv1.SetObjectDefaults_WebApp: an
// object defaulted by the API server and one defaulted in Go (by the webhook,
// or a test) must be the same object.
func TestDefaultsMatchTheGoDefaulter(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)

	cases := []struct {
		name   string
		object string
		spec   handrollv1.WebAppSpec
		want   handrollv1.WebAppSpec
	}{
		{
			name:   "image only",
			object: "image-only",
			spec:   handrollv1.WebAppSpec{Image: "nginx"},
			want: handrollv1.WebAppSpec{
				Image:    "nginx",
				Replicas: ptr.To[int32](1),
				Port:     ptr.To[int32](8080),
				Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](80)},
			},
		},
		{
			// Replicas is a pointer so that an explicit 0 (scaled to zero)
			// is kept, not replaced by the default.
			name:   "explicit zero replicas",
			object: "zero-replicas",
			spec:   handrollv1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](0)},
			want: handrollv1.WebAppSpec{
				Image:    "nginx",
				Replicas: ptr.To[int32](0),
				Port:     ptr.To[int32](8080),
				Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](80)},
			},
		},
		{
			// A partly given service gets the defaults of its other fields.
			name:   "service type only",
			object: "service-type-only",
			spec:   handrollv1.WebAppSpec{Image: "nginx", Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort)}},
			want: handrollv1.WebAppSpec{
				Image:    "nginx",
				Replicas: ptr.To[int32](1),
				Port:     ptr.To[int32](8080),
				Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](80)},
			},
		},
		{
			name:   "explicit values are kept",
			object: "explicit-values",
			spec: handrollv1.WebAppSpec{
				Image: "nginx", Replicas: ptr.To[int32](3), Port: ptr.To[int32](9090),
				Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](443), NodePort: 30443},
			},
			want: handrollv1.WebAppSpec{
				Image: "nginx", Replicas: ptr.To[int32](3), Port: ptr.To[int32](9090),
				Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](443), NodePort: 30443},
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			w := &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: tc.object},
				Spec:       *tc.spec.DeepCopy(),
			}
			if _, err := client.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s: %v", asJSON(tc.spec), err)
			}
			// Read back rather than trust Create's answer: the stored
			// object is what every other client sees.
			got, err := client.HandrollV1().WebApps(ns).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading back %s: %v", w.Name, err)
			}
			if !equality.Semantic.DeepEqual(got.Spec, tc.want) {
				t.Fatalf("server-defaulted spec:\n got  %s\n want %s", asJSON(got.Spec), asJSON(tc.want))
			}

			inGo := &handrollv1.WebApp{Spec: *tc.spec.DeepCopy()}
			handrollv1.SetObjectDefaults_WebApp(inGo)
			if !equality.Semantic.DeepEqual(got.Spec, inGo.Spec) {
				t.Fatalf("the API server and the Go defaulter disagree:\n server %s\n Go     %s", asJSON(got.Spec), asJSON(inGo.Spec))
			}
		})
	}
}

// TestValuesAtTheLimitsAreAccepted checks the other side of each bound that
// TestInvalidWebAppsAreRejected tests: the largest (or smallest) allowed
// value is stored unchanged.
func TestValuesAtTheLimitsAreAccepted(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)

	cases := []struct {
		name   string
		object string
		mutate func(*handrollv1.WebApp)
	}{
		{"50 replicas", "max-replicas", func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](50) }},
		{"63-character name", "a" + strings.Repeat("b", 61) + "c", nil},
		{"one-character name", "a", nil},
		{"128 env vars", "max-env", func(w *handrollv1.WebApp) { w.Spec.Env = envVars(128) }},
		{"256 config entries", "max-config", func(w *handrollv1.WebApp) { w.Spec.Config = configEntries(256) }},
		{"config key of 253 characters", "long-key", func(w *handrollv1.WebApp) {
			w.Spec.Config = map[string]string{strings.Repeat("k", 250) + "._-": "x"}
		}},
		{"port 1", "min-port", func(w *handrollv1.WebApp) { w.Spec.Port = ptr.To[int32](1) }},
		{"port 65535", "max-port", func(w *handrollv1.WebApp) { w.Spec.Port = ptr.To[int32](65535) }},
		{"service port 65535", "max-service-port", func(w *handrollv1.WebApp) {
			w.Spec.Service = &handrollv1.WebAppService{Port: ptr.To[int32](65535)}
		}},
		{"nodePort 30000 with NodePort", "min-node-port", func(w *handrollv1.WebApp) {
			w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), NodePort: 30000}
		}},
		{"nodePort 32767 with NodePort", "max-node-port", func(w *handrollv1.WebApp) {
			w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), NodePort: 32767}
		}},
		{"image of 4096 characters", "max-image", func(w *handrollv1.WebApp) { w.Spec.Image = strings.Repeat("a", 4096) }},
		{"requests equal to limits", "equal-resources", func(w *handrollv1.WebApp) {
			w.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:              resource.MustParse("1000m"),
					corev1.ResourceMemory:           resource.MustParse("1Gi"),
					corev1.ResourceEphemeralStorage: resource.MustParse("1G"),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceCPU:              resource.MustParse("1"),
					corev1.ResourceMemory:           resource.MustParse("1024Mi"),
					corev1.ResourceEphemeralStorage: resource.MustParse("1000M"),
				},
			}
		}},
		{"request below limit in other units", "smaller-request", func(w *handrollv1.WebApp) {
			w.Spec.Resources = requestsAndLimits(corev1.ResourceMemory, "512Mi", "1Gi")
		}},
		{"request without limit", "request-only", func(w *handrollv1.WebApp) {
			w.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")},
			}
		}},
		{"configMapRef to another ConfigMap", "shop", func(w *handrollv1.WebApp) {
			w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: "shop-config.d"}
		}},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			w := newWebApp(tc.object)
			if tc.mutate != nil {
				tc.mutate(w)
			}
			want := w.DeepCopy()
			handrollv1.SetObjectDefaults_WebApp(want)

			if _, err := client.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s: %v", tc.object, err)
			}
			got, err := client.HandrollV1().WebApps(ns).Get(ctx, tc.object, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading back %s: %v", tc.object, err)
			}
			// Nothing pruned or rewritten: the stored spec is the one sent,
			// plus defaults.
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Fatalf("stored spec differs from the one sent:\n got  %s\n want %s", asJSON(got.Spec), asJSON(want.Spec))
			}
		})
	}
}
