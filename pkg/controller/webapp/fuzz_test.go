package webapp

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// FuzzDesiredState builds a WebApp from the input, keeps it only if it
// passes validation (what admission lets through), and runs every builder
// the reconciler runs on it: the children, the config hash, the URL, the
// status for a missing and for a half-rolled-out Deployment. None may
// panic, and each child must encode to JSON naming the WebApp's namespace.
func FuzzDesiredState(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		[]byte("shop"),
		[]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"),
		[]byte("a longer seed that fills more of the spec: env, resources, config and a service"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := plausibleWebApp(data)
		handrollv1.SetObjectDefaults_WebApp(w)
		if errs := handrollv1.ValidateWebApp(w); len(errs) > 0 {
			t.Skip("invalid: admission refuses it")
		}
		var ref *corev1.ConfigMap
		if w.Spec.ConfigMapRef != nil {
			ref = &corev1.ConfigMap{Data: map[string]string{"k": string(data)}, BinaryData: map[string][]byte{"k": data}}
		}
		children := []any{DesiredDeployment(w, ref), DesiredService(w)}
		if cm := DesiredConfigMap(w); cm != nil {
			children = append(children, cm)
		} else if len(w.Spec.Config) > 0 {
			t.Fatalf("spec.config has %d keys and no ConfigMap is desired", len(w.Spec.Config))
		}
		for _, c := range children {
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatalf("%T does not encode: %v", c, err)
			}
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(out, &meta); err != nil || meta.Metadata.Namespace != w.Namespace {
				t.Fatalf("%T: namespace %q, want %q (%v)", c, meta.Metadata.Namespace, w.Namespace, err)
			}
		}
		_ = ConfigHash(w.Spec.Config, ref)
		_ = URL(w)
		now := metav1.Now()
		_ = ComputeStatus(w, Observed{}, now)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 1, UpdatedReplicas: 2, AvailableReplicas: 1}
		_ = ComputeStatus(w, Observed{Deployment: d, ServiceExists: true}, now)
	})
}

// plausibleWebApp fills a WebApp from data, then steers the fields that
// random bytes almost never make valid (image references, names, ports,
// quantities) into their valid ranges, so that most inputs pass validation
// and reach the builders. What stays random is what the builders must cope
// with: counts, lengths, optional parts, values.
func plausibleWebApp(data []byte) *handrollv1.WebApp {
	w := &handrollv1.WebApp{}
	fill := randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 4)
	fill.Fill(&w.Spec)
	var pick uint8
	fill.Fill(&pick)

	images := []string{"nginx", "nginx:1.27", "registry.example:5000/team/app@sha256:" + fmt.Sprintf("%064x", pick), "ghcr.io/org/app:v1.2.3-rc.1"}
	w.Name = fmt.Sprintf("app-%d", pick)
	w.Namespace = fmt.Sprintf("ns-%d", pick%7)
	w.UID = "uid"
	w.Spec.Image = images[int(pick)%len(images)]
	if w.Spec.Replicas != nil {
		r := abs(*w.Spec.Replicas) % (handrollv1.MaxReplicas + 1)
		w.Spec.Replicas = &r
	}
	if w.Spec.Port != nil {
		p := 1 + abs(*w.Spec.Port)%65535
		w.Spec.Port = &p
	}
	for i := range w.Spec.Env {
		w.Spec.Env[i] = corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", i), Value: w.Spec.Env[i].Value}
	}
	w.Spec.Resources = corev1.ResourceRequirements{}
	if pick%3 == 0 {
		w.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(pick), resource.DecimalSI)}
		w.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(pick)+100, resource.DecimalSI)}
	}
	config := map[string]string{}
	i := 0
	for _, v := range w.Spec.Config {
		config[fmt.Sprintf("file-%d.conf", i)] = v
		i++
	}
	w.Spec.Config = config
	if w.Spec.ConfigMapRef != nil {
		w.Spec.ConfigMapRef.Name = fmt.Sprintf("settings-%d", pick)
	}
	if s := w.Spec.Service; s != nil {
		if s.Port != nil {
			p := 1 + abs(*s.Port)%65535
			s.Port = &p
		}
		if pick%2 == 0 {
			s.Type, s.NodePort = ptr.To(handrollv1.ServiceTypeClusterIP), 0
		} else {
			s.Type = ptr.To(handrollv1.ServiceTypeNodePort)
			if s.NodePort != 0 {
				s.NodePort = 30000 + abs(s.NodePort)%2768
			}
		}
	}
	return w
}

func abs(n int32) int32 {
	if n < 0 {
		if n == -n { // math.MinInt32
			return 0
		}
		return -n
	}
	return n
}
