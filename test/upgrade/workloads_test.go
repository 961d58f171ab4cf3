package upgrade

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

const image = "nginx:1.27"

// measured are the WebApps whose children must come through the upgrade
// untouched: every feature of the spec, alone and together, replicas 0, 1
// and many, and one that cannot progress (its Deployment's name is taken).
// fixedNodePort is the node port one of them asks for: a node port is the
// cluster's, so each upgrade in a run asks for its own.
func measured(fixedNodePort int32) []*handrollv1.WebApp {
	nodePort := ptr.To(handrollv1.ServiceTypeNodePort)
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	emptyEnv := []corev1.EnvVar{{Name: "EMPTY", Value: ""}, {Name: "GREETING", Value: "hello"}, {Name: "ALSO_EMPTY"}}
	w := func(name string, replicas int32, spec handrollv1.WebAppSpec) *handrollv1.WebApp {
		spec.Image, spec.Replicas = image, ptr.To(replicas)
		return &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	return []*handrollv1.WebApp{
		w("defaults", 1, handrollv1.WebAppSpec{}),
		w("zero", 0, handrollv1.WebAppSpec{}),
		w("config", 1, handrollv1.WebAppSpec{Config: map[string]string{"app.yaml": "greeting: hello\n", "empty": ""}}),
		w("configmapref", 1, handrollv1.WebAppSpec{ConfigMapRef: &handrollv1.ConfigMapReference{Name: "settings"}}),
		w("env", 1, handrollv1.WebAppSpec{Env: emptyEnv}),
		w("clusterip", 1, handrollv1.WebAppSpec{Port: ptr.To[int32](9000),
			Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](9090)}}),
		w("nodeport", 1, handrollv1.WebAppSpec{Service: &handrollv1.WebAppService{Type: nodePort}}),
		w("nodeport-fixed", 1, handrollv1.WebAppSpec{Service: &handrollv1.WebAppService{Type: nodePort, Port: ptr.To[int32](8000), NodePort: fixedNodePort}}),
		w("resources", 5, handrollv1.WebAppSpec{Resources: resources}),
		w("everything", 3, handrollv1.WebAppSpec{
			Port: ptr.To[int32](8081), Env: emptyEnv, Resources: resources,
			Config:       map[string]string{"app.yaml": "greeting: hello\n"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "settings"},
			Service:      &handrollv1.WebAppService{Type: nodePort, Port: ptr.To[int32](8080)},
		}),
		w("taken", 1, handrollv1.WebAppSpec{}),
	}
}

// createMeasured creates the measured WebApps in ns, with what they need
// first: the user's ConfigMap, and the foreign Deployment that takes
// "taken"'s name. One more is written as v1alpha1.
func createMeasured(ctx context.Context, t *testing.T, kube kubernetes.Interface, hc versioned.Interface, ns string, fixedNodePort int32) (names []string) {
	t.Helper()
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"settings.yaml": "level: 3\n", "blank": ""},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "someone-elses"}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range measured(fixedNodePort) {
		if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating WebApp %s: %v", w.Name, err)
		}
		names = append(names, w.Name)
	}
	alpha := &handrollv1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha"},
		Spec: handrollv1alpha1.WebAppSpec{
			Image: image, Size: ptr.To[int32](2), ContainerPort: ptr.To[int32](9090),
			Env:        []corev1.EnvVar{{Name: "EMPTY"}},
			ConfigData: map[string]string{"greeting": "hello"},
		},
	}
	if _, err := hc.HandrollV1alpha1().WebApps(ns).Create(ctx, alpha, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the v1alpha1 WebApp: %v", err)
	}
	return append(names, alpha.Name)
}
