package cache_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller/webapp"
)

var protobufCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// servedChildren are the i-th WebApp's children as the API server serves
// them to a watch, in protobuf: what handroll applied, with the server's
// metadata and, for the Deployment, a rolled-out status and
// kube-controller-manager's revision annotation. managedFields and the
// server's defaults are left out: the transform drops them, so they cost
// the decode, not the cache.
func servedChildren(tb testing.TB, i int) [][]byte {
	tb.Helper()
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Namespace: fmt.Sprintf("team-%02d", i%30), UID: types.UID(fmt.Sprintf("4c7b1a3e-0000-4000-8000-%012d", i))},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), Config: map[string]string{"app.yaml": "greeting: hello\n"}},
	}
	handrollv1.SetObjectDefaults_WebApp(w)
	serve := func(desired any, obj interface {
		metav1.Object
		k8sruntime.Object
	}, edit func()) []byte {
		data, err := json.Marshal(desired)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			tb.Fatal(err)
		}
		obj.SetUID(types.UID(fmt.Sprintf("9d0c2f4b-0000-4000-8000-%012d", i)))
		obj.SetResourceVersion(fmt.Sprint(100000 + i))
		obj.SetGeneration(1)
		obj.SetCreationTimestamp(metav1.Now())
		edit()
		var buf bytes.Buffer
		if err := protobufCodec.Encode(obj, &buf); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	}
	d := &appsv1.Deployment{}
	return [][]byte{
		serve(webapp.DesiredDeployment(w, nil), d, func() {
			d.Annotations["deployment.kubernetes.io/revision"] = "1"
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
						Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", w.Name+"-5d8f7c9b6")},
				}}
		}),
		serve(webapp.DesiredService(w), &corev1.Service{}, func() {}),
		serve(webapp.DesiredConfigMap(w), &corev1.ConfigMap{}, func() {}),
	}
}

// BenchmarkTrimmedChildrenRetained reports what the children's caches keep
// per WebApp (a Deployment, a Service and a ConfigMap, decoded from
// protobuf as a watch decodes them, then CompactChild): the live heap they add,
// in bytes per WebApp, after a collection.
func BenchmarkTrimmedChildrenRetained(b *testing.B) {
	const n = 2000
	served := make([][][]byte, n)
	for i := range n {
		served[i] = servedChildren(b, i)
	}
	var perWebApp float64
	for b.Loop() {
		kept := make([]any, 0, 3*n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, children := range served {
			for _, data := range children {
				kept = append(kept, decodeAndTrim(b, data))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perWebApp = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(kept)
	}
	b.ReportMetric(perWebApp, "retained-B/WebApp")
}

// decodeAndTrim is what a child's watch event costs the cache: the
// protobuf decode, then the transform (CompactChild).
func decodeAndTrim(b *testing.B, data []byte) any {
	trimmed, err := handrollcache.CompactChild(decodeServed(b, data))
	if err != nil {
		b.Fatal(err)
	}
	return trimmed
}

func decodeServed(tb testing.TB, data []byte) k8sruntime.Object {
	obj, _, err := protobufCodec.Decode(data, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return obj
}

// BenchmarkDecodeAndTrimChild is the cost of one watch event of a child
// to the cache, with the children of 2000 WebApps already cached.
func BenchmarkDecodeAndTrimChild(b *testing.B) {
	const n = 2000
	served := make([][][]byte, n)
	cached := make([]any, 0, 3*n)
	for i := range n {
		served[i] = servedChildren(b, i)
		for _, data := range served[i] {
			cached = append(cached, decodeAndTrim(b, data))
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		decodeAndTrim(b, served[i%n][i%3])
	}
	runtime.KeepAlive(cached)
}

// TestTrimmedChildrenShareRepeatedStrings: two WebApps' children, decoded
// apart, keep one copy of the strings every child repeats (label keys, the
// managed-by value, the owner's kind), and each its own instance name.
func TestTrimmedChildrenShareRepeatedStrings(t *testing.T) {
	decode := func(i int) *appsv1.Deployment {
		obj, _, err := protobufCodec.Decode(servedChildren(t, i)[0], nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		trimmed, err := handrollcache.TrimChild(obj)
		if err != nil {
			t.Fatal(err)
		}
		return trimmed.(*appsv1.Deployment)
	}
	a, b := decode(1), decode(31) // the same namespace
	keyOf := func(m map[string]string, key string) string {
		for k := range m {
			if k == key {
				return k
			}
		}
		t.Fatalf("no label %s in %v", key, m)
		return ""
	}
	same := func(what, x, y string) {
		t.Helper()
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: two copies of %q", what, x)
		}
	}
	same("label key", keyOf(a.Labels, webapp.LabelManagedBy), keyOf(b.Labels, webapp.LabelManagedBy))
	same("label value", a.Labels[webapp.LabelManagedBy], b.Labels[webapp.LabelManagedBy])
	same("selector key", keyOf(a.Spec.Selector.MatchLabels, webapp.LabelName), keyOf(b.Spec.Selector.MatchLabels, webapp.LabelName))
	same("owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	same("namespace", a.Namespace, b.Namespace)
	if a.Labels[webapp.LabelInstance] == b.Labels[webapp.LabelInstance] {
		t.Errorf("two WebApps with one instance label %q", a.Labels[webapp.LabelInstance])
	}
}
