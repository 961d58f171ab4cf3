package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
)

// newWebApp is the smallest valid WebApp: a name and an image. Defaults are
// left to the API server.
func newWebApp(name string) *handrollv1.WebApp {
	return &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}
}

func envVars(n int) []corev1.EnvVar {
	vars := make([]corev1.EnvVar, n)
	for i := range vars {
		vars[i] = corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", i), Value: "x"}
	}
	return vars
}

func configEntries(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("key-%d.conf", i)] = "x"
	}
	return m
}

func requestsAndLimits(name corev1.ResourceName, request, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{name: resource.MustParse(request)},
		Limits:   corev1.ResourceList{name: resource.MustParse(limit)},
	}
}

// TestInvalidWebAppsAreRejected checks that the API server itself refuses
// invalid WebApps, through the CRD's OpenAPI schema and its CEL rules, so
// that no client can store one even when no webhook runs. Each case names
// the field path the server must report and a fragment of its message, so a
// case cannot pass on an unrelated error.
func TestInvalidWebAppsAreRejected(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)
	dyn := dynamicClient(t)

	for _, tc := range invalidWebAppCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			var err error
			if tc.spec != "" {
				gv := handrollv1.SchemeGroupVersion
				if tc.alpha {
					gv = handrollv1alpha1.SchemeGroupVersion
				}
				obj, uerr := unstructuredWebApp(gv.String(), tc.object, tc.spec)
				if uerr != nil {
					t.Fatalf("bad test case: %v", uerr)
				}
				_, err = dyn.Resource(gv.WithResource(handrollv1.WebAppResource)).
					Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
			} else {
				w := newWebApp(tc.object)
				if tc.mutate != nil {
					tc.mutate(w)
				}
				_, err = client.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{})
			}
			if tc.atRoot {
				assertInvalidAtRoot(t, err, tc.field, tc.detail)
			} else {
				assertInvalid(t, err, tc.field, tc.detail)
			}
		})
	}
}

// invalidWebAppCase is a WebApp the API server must refuse, and the error
// it must report.
type invalidWebAppCase struct {
	name string
	// object is the WebApp's metadata.name.
	object string
	// Either mutate changes a valid typed WebApp, or spec is the raw
	// JSON spec, for what the Go types cannot send (a missing required
	// field, a wrong type, a zero that omitempty would drop).
	mutate func(*handrollv1.WebApp)
	spec   string
	// alpha sends spec as handroll.dev/v1alpha1.
	alpha bool
	// field is the path the server must report; detail a fragment of
	// that error's message.
	field  string
	detail string
	// atRoot marks a rule on the whole object without a fieldPath: the
	// server reports it at the object's root, and only the rule's
	// message names field.
	atRoot bool
}

// invalidWebAppCases are TestInvalidWebAppsAreRejected's cases.
var invalidWebAppCases = []invalidWebAppCase{
	// Schema: image.
	{name: "image missing", object: "no-image", spec: `{"replicas": 1}`,
		field: "spec.image", detail: "Required value"},
	{name: "image empty", object: "empty-image", mutate: func(w *handrollv1.WebApp) { w.Spec.Image = "" },
		field: "spec.image", detail: "at least 1 chars long"},
	{name: "image with a space", object: "spaced-image", mutate: func(w *handrollv1.WebApp) { w.Spec.Image = "nginx 1.27" },
		field: "spec.image", detail: "should match"},
	{name: "image longer than 4096", object: "long-image", mutate: func(w *handrollv1.WebApp) { w.Spec.Image = strings.Repeat("a", 4097) },
		field: "spec.image", detail: "may not be more than 4096 bytes"},

	// Schema: replicas and ports.
	{name: "negative replicas", object: "negative-replicas", mutate: func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](-1) },
		field: "spec.replicas", detail: "greater than or equal to 0"},
	{name: "51 replicas", object: "too-many-replicas", mutate: func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](51) },
		field: "spec.replicas", detail: "less than or equal to 50"},
	{name: "replicas of the wrong type", object: "string-replicas", spec: `{"image": "nginx", "replicas": "three"}`,
		field: "spec.replicas", detail: "must be of type integer"},
	{name: "port 0", object: "port-zero", spec: `{"image": "nginx", "port": 0}`,
		field: "spec.port", detail: "greater than or equal to 1"},
	// An explicit invalid value is refused, not replaced by the default
	// that a field left out gets.
	{name: "service port 0", object: "service-port-zero", spec: `{"image": "nginx", "service": {"port": 0}}`,
		field: "spec.service.port", detail: "greater than or equal to 1"},
	{name: "service type empty", object: "service-type-empty", spec: `{"image": "nginx", "service": {"type": ""}}`,
		field: "spec.service.type", detail: `Unsupported value: ""`},
	{name: "v1alpha1 containerPort 0", object: "container-port-zero", alpha: true, spec: `{"image": "nginx", "containerPort": 0}`,
		field: "spec.containerPort", detail: "greater than or equal to 1"},
	{name: "port 65536", object: "port-too-high", mutate: func(w *handrollv1.WebApp) { w.Spec.Port = ptr.To[int32](65536) },
		field: "spec.port", detail: "less than or equal to 65535"},
	{name: "service port 65536", object: "service-port-too-high", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{Port: ptr.To[int32](65536)}
	}, field: "spec.service.port", detail: "less than or equal to 65535"},

	// Schema: enum and node port range.
	{name: "service type LoadBalancer", object: "load-balancer", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType]("LoadBalancer")}
	}, field: "spec.service.type", detail: `Unsupported value: "LoadBalancer"`},
	{name: "nodePort below the range", object: "node-port-low", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), NodePort: 29999}
	}, field: "spec.service.nodePort", detail: "greater than or equal to 30000"},
	{name: "nodePort above the range", object: "node-port-high", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), NodePort: 32768}
	}, field: "spec.service.nodePort", detail: "less than or equal to 32767"},

	// Schema: list and map sizes, list-map keys.
	{name: "129 env vars", object: "too-much-env", mutate: func(w *handrollv1.WebApp) { w.Spec.Env = envVars(129) },
		field: "spec.env", detail: "must have at most 128 items"},
	{name: "duplicate env names", object: "duplicate-env", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Env = []corev1.EnvVar{{Name: "MODE", Value: "a"}, {Name: "MODE", Value: "b"}}
	}, field: "spec.env[1]", detail: "Duplicate value"},
	{name: "257 config entries", object: "too-much-config", mutate: func(w *handrollv1.WebApp) { w.Spec.Config = configEntries(257) },
		field: "spec.config", detail: "must have at most 256 items"},

	// Schema: configMapRef.name.
	{name: "configMapRef name with upper case", object: "upper-ref", mutate: func(w *handrollv1.WebApp) {
		w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: "Settings"}
	}, field: "spec.configMapRef.name", detail: "should match"},
	{name: "configMapRef name empty", object: "empty-ref", mutate: func(w *handrollv1.WebApp) {
		w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: ""}
	}, field: "spec.configMapRef.name", detail: "at least 1 chars long"},

	// CEL: requests must not exceed limits. Memory mixes units so that a
	// string comparison would get it wrong ("1Gi" < "512Mi").
	{name: "cpu request above limit", object: "cpu-over", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Resources = requestsAndLimits(corev1.ResourceCPU, "2", "1500m")
	}, field: "spec.resources.requests", detail: "each resource request must be less than or equal to its limit"},
	{name: "memory request above limit", object: "memory-over", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Resources = requestsAndLimits(corev1.ResourceMemory, "1Gi", "512Mi")
	}, field: "spec.resources.requests", detail: "each resource request must be less than or equal to its limit"},
	{name: "ephemeral-storage request above limit", object: "storage-over", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Resources = requestsAndLimits(corev1.ResourceEphemeralStorage, "2G", "1G")
	}, field: "spec.resources.requests", detail: "each resource request must be less than or equal to its limit"},

	// CEL: config keys.
	{name: "config key with a slash", object: "slash-key", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Config = map[string]string{"conf/app.yaml": "x"}
	}, field: "spec.config", detail: "config keys must be at most 253 characters"},
	{name: "config key of 254 characters", object: "long-key", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Config = map[string]string{strings.Repeat("k", 254): "x"}
	}, field: "spec.config", detail: "config keys must be at most 253 characters"},

	// CEL: nodePort only with NodePort, also when type is left to its
	// default (the rule sees the defaulted object).
	{name: "nodePort with ClusterIP", object: "cluster-ip-node-port", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), NodePort: 30080}
	}, field: "spec.service.nodePort", detail: "nodePort may only be set when type is NodePort"},
	{name: "nodePort with defaulted type", object: "default-type-node-port", mutate: func(w *handrollv1.WebApp) {
		w.Spec.Service = &handrollv1.WebAppService{NodePort: 30080}
	}, field: "spec.service.nodePort", detail: "nodePort may only be set when type is NodePort"},

	// CEL: configMapRef must not name the ConfigMap handroll owns.
	{name: "configMapRef to <name>-config", object: "shop", mutate: func(w *handrollv1.WebApp) {
		w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: "shop-config"}
	}, field: "spec.configMapRef.name", detail: "must not be <name>-config"},

	// CEL: metadata.name is a DNS-1035 label. Each of these names is a
	// valid object name (a DNS-1123 subdomain), so only the rule refuses
	// it. The rule sits on the root of the schema, whose metadata
	// declares no properties for a fieldPath to name.
	{name: "name with a dot", object: "a.b",
		field: "metadata.name", detail: "must be a DNS-1035 label", atRoot: true},
	{name: "name starting with a digit", object: "1shop",
		field: "metadata.name", detail: "must be a DNS-1035 label", atRoot: true},
	{name: "name of 64 characters", object: strings.Repeat("a", 64),
		field: "metadata.name", detail: "must be a DNS-1035 label", atRoot: true},
}

// unstructuredWebApp builds a WebApp of apiVersion from a raw JSON spec.
func unstructuredWebApp(apiVersion, name, spec string) (*unstructured.Unstructured, error) {
	doc := fmt.Sprintf(`{"apiVersion": %q, "kind": %q, "metadata": {"name": %q}, "spec": %s}`,
		apiVersion, handrollv1.WebAppKind, name, spec)
	obj := map[string]any{}
	if err := json.Unmarshal([]byte(doc), &obj); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// rootPath is how the API server reports the path of an error about the
// whole object: a nil field.Path, printed as "<nil>".
const rootPath = "<nil>"

// assertInvalid fails t unless err is a 422 Invalid whose message names
// field and one of whose causes is about field and contains detail.
func assertInvalid(t *testing.T, err error, field, detail string) {
	t.Helper()
	assertInvalidCause(t, err, field, field, detail)
}

// assertInvalidAtRoot is assertInvalid for a rule on the whole object: its
// cause is at the root and its message, rather than its path, names field.
func assertInvalidAtRoot(t *testing.T, err error, field, detail string) {
	t.Helper()
	assertInvalidCause(t, err, field, rootPath, field+" "+detail)
}

func assertInvalidCause(t *testing.T, err error, field, causeField, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted the object; want it rejected at %s (%q)", field, detail)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v (reason %q), want an Invalid error at %s", err, apierrors.ReasonForError(err), field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("the error does not name the field %s: %v", field, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("the error carries no details: %v", err)
	}
	causes := status.Status().Details.Causes
	for _, c := range causes {
		if c.Field == causeField && strings.Contains(c.Message, detail) {
			t.Logf("rejected as expected: %v", err)
			return
		}
	}
	t.Fatalf("no cause at %s containing %q; causes: %s", causeField, detail, asJSON(causes))
}
