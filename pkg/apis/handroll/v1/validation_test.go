package v1_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

func validWebApp() *handrollv1.WebApp {
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "default"},
		Spec: handrollv1.WebAppSpec{
			Image:  "example.com/shop:v1",
			Env:    []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
			Config: map[string]string{"app.yaml": "a: 1"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "shared-settings"},
		},
	}
	handrollv1.SetObjectDefaults_WebApp(w)
	return w
}

func TestValidateWebAppAcceptsValid(t *testing.T) {
	cases := map[string]func(*handrollv1.WebApp){
		"as built":          func(*handrollv1.WebApp) {},
		"zero replicas":     func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](0) },
		"fifty replicas":    func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](50) },
		"63-character name": func(w *handrollv1.WebApp) { w.Name = "a" + strings.Repeat("b", 62) },
		"node port": func(w *handrollv1.WebApp) {
			w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType]("NodePort"), Port: ptr.To[int32](80), NodePort: 30080}
		},
		"request equals limit": func(w *handrollv1.WebApp) {
			w.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
		},
		"1 MiB of config": func(w *handrollv1.WebApp) {
			w.Spec.Config = map[string]string{"k": strings.Repeat("x", handrollv1.MaxConfigBytes-1)}
		},
		"env from a secret ref": func(w *handrollv1.WebApp) {
			w.Spec.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{}}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			w := validWebApp()
			mutate(w)
			if errs := handrollv1.ValidateWebApp(w); len(errs) != 0 {
				t.Errorf("unexpected errors: %v", errs.ToAggregate())
			}
		})
	}
}

func TestValidateWebAppRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*handrollv1.WebApp)
		field  string // the field path the error must name
		detail string // a fragment of the message
	}{
		{"name with upper case", func(w *handrollv1.WebApp) { w.Name = "Shop" }, "metadata.name", "Service"},
		{"name starting with a digit", func(w *handrollv1.WebApp) { w.Name = "1shop" }, "metadata.name", "alphabetic"},
		{"the conversion annotation on v1", func(w *handrollv1.WebApp) {
			w.Annotations = map[string]string{handrollv1.V1SpecAnnotation: "{}"}
		}, "metadata.annotations[handroll.dev/v1-spec]", "reserved"},
		{"name of 64 characters", func(w *handrollv1.WebApp) { w.Name = strings.Repeat("a", 64) }, "metadata.name", "63"},
		{"no image", func(w *handrollv1.WebApp) { w.Spec.Image = "" }, "spec.image", "Required"},
		{"image with a bad tag", func(w *handrollv1.WebApp) { w.Spec.Image = "nginx:" }, "spec.image", "tag"},
		{"image with upper case path", func(w *handrollv1.WebApp) { w.Spec.Image = "Nginx" }, "spec.image", "lower case"},
		{"negative replicas", func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas", "between 0 and 50"},
		{"51 replicas", func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To[int32](51) }, "spec.replicas", "between 0 and 50"},
		{"port out of range", func(w *handrollv1.WebApp) { w.Spec.Port = ptr.To[int32](70000) }, "spec.port", "between 1 and 65535"},
		// An explicit zero is refused, not taken for a field left out.
		{"port 0", func(w *handrollv1.WebApp) { w.Spec.Port = ptr.To[int32](0) }, "spec.port", "between 1 and 65535"},
		{"reserved env name", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Name: "HANDROLL_URL", Value: "x"}} }, "spec.env[0].name", "reserved"},
		{"invalid env name", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Name: "1=A", Value: "x"}} }, "spec.env[0].name", "valid environment variable name"},
		{"empty env name", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Value: "x"}} }, "spec.env[0].name", "Required"},
		{"duplicate env name", func(w *handrollv1.WebApp) {
			w.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}
		}, "spec.env[1].name", "Duplicate"},
		{"env value and valueFrom", func(w *handrollv1.WebApp) {
			w.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1", ValueFrom: &corev1.EnvVarSource{}}}
		}, "spec.env[0].valueFrom", "may not be set"},
		{"too many env", func(w *handrollv1.WebApp) {
			w.Spec.Env = nil
			for i := 0; i <= handrollv1.MaxEnv; i++ {
				w.Spec.Env = append(w.Spec.Env, corev1.EnvVar{Name: "V" + strings.Repeat("X", i)})
			}
		}, "spec.env", "Too many"},
		{"request above limit", func(w *handrollv1.WebApp) {
			w.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}, "spec.resources.requests[cpu]", "less than or equal to the cpu limit"},
		{"config key with a slash", func(w *handrollv1.WebApp) { w.Spec.Config = map[string]string{"a/b": "x"} }, "spec.config[a/b]", "config key"},
		{"config over 1 MiB", func(w *handrollv1.WebApp) {
			w.Spec.Config = map[string]string{"a": strings.Repeat("x", handrollv1.MaxConfigBytes)}
		}, "spec.config", "Too long"},
		{"configMapRef without a name", func(w *handrollv1.WebApp) { w.Spec.ConfigMapRef.Name = "" }, "spec.configMapRef.name", "Required"},
		{"configMapRef to the owned ConfigMap", func(w *handrollv1.WebApp) { w.Spec.ConfigMapRef.Name = "shop-config" }, "spec.configMapRef.name", "owned by handroll"},
		{"configMapRef with a bad name", func(w *handrollv1.WebApp) { w.Spec.ConfigMapRef.Name = "Bad_Name" }, "spec.configMapRef.name", "RFC 1123"},
		{"service type LoadBalancer", func(w *handrollv1.WebApp) { w.Spec.Service.Type = ptr.To[handrollv1.ServiceType]("LoadBalancer") }, "spec.service.type", "Unsupported value"},
		{"service type empty", func(w *handrollv1.WebApp) { w.Spec.Service.Type = ptr.To[handrollv1.ServiceType]("") }, "spec.service.type", "Unsupported value"},
		{"service port negative", func(w *handrollv1.WebApp) { w.Spec.Service.Port = ptr.To[int32](-1) }, "spec.service.port", "between 1 and 65535"},
		{"service port 0", func(w *handrollv1.WebApp) { w.Spec.Service.Port = ptr.To[int32](0) }, "spec.service.port", "between 1 and 65535"},
		{"nodePort with ClusterIP", func(w *handrollv1.WebApp) { w.Spec.Service.NodePort = 30001 }, "spec.service.nodePort", "only be set when type is NodePort"},
		{"nodePort out of range", func(w *handrollv1.WebApp) {
			w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType]("NodePort"), Port: ptr.To[int32](80), NodePort: 8080}
		}, "spec.service.nodePort", "between 30000 and 32767"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := validWebApp()
			tc.mutate(w)
			errs := handrollv1.ValidateWebApp(w)
			if len(errs) == 0 {
				t.Fatalf("accepted; want an error at %s", tc.field)
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.detail) {
					return
				}
			}
			t.Errorf("no error at %s mentioning %q; got: %v", tc.field, tc.detail, errs.ToAggregate())
		})
	}
}
