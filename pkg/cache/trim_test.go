package cache_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller/webapp"
)

// maximalWebApp sets every feature of the spec, so that its children carry
// every field handroll ever applies.
func maximalWebApp(ns string) *handrollv1.WebApp {
	nodePort := handrollv1.ServiceTypeNodePort
	return &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "4c7b1a3e-0000-4000-8000-000000000001"},
		Spec: handrollv1.WebAppSpec{
			Image:    "registry.example/team/app:1.2.3",
			Replicas: ptr.To[int32](3),
			Port:     ptr.To[int32](8443),
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: "prod"},
				{Name: "EMPTY", Value: ""},
				{Name: "FROM_CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "k", Optional: ptr.To(true)}}},
				{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "CPUS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
					ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			Config:       map[string]string{"app.yaml": "level: debug\n", "feature": "on"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "shared-settings"},
			Service:      &handrollv1.WebAppService{Type: &nodePort, Port: ptr.To[int32](8080), NodePort: 30080},
		},
	}
}

// webApps are the variants whose children the transform must keep whole:
// the maximal one, the defaults, and a ClusterIP Service with a port.
func webApps() map[string]*handrollv1.WebApp {
	clusterIP := handrollv1.ServiceTypeClusterIP
	minimal := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "min", Namespace: "a", UID: "uid-min"},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}
	clusterIPPort := maximalWebApp("a")
	clusterIPPort.Spec.Service = &handrollv1.WebAppService{Type: &clusterIP, Port: ptr.To[int32](81)}
	clusterIPPort.Spec.Replicas = ptr.To[int32](0)
	out := map[string]*handrollv1.WebApp{"maximal": maximalWebApp("a"), "minimal": minimal, "clusterIP": clusterIPPort}
	for _, w := range out {
		handrollv1.SetObjectDefaults_WebApp(w)
	}
	return out
}

// child is one desired child and a fresh object of its typed kind.
type child struct {
	kind    string
	desired any
	newLive func() any
}

func children(w *handrollv1.WebApp) []child {
	out := []child{
		{"Deployment", webapp.DesiredDeployment(w, &corev1.ConfigMap{Data: map[string]string{"k": "v"}}), func() any { return &appsv1.Deployment{} }},
		{"Service", webapp.DesiredService(w), func() any { return &corev1.Service{} }},
	}
	if cm := webapp.DesiredConfigMap(w); cm != nil {
		out = append(out, child{"ConfigMap", cm, func() any { return &corev1.ConfigMap{} }})
	}
	return out
}

// live is desired as the API server stores and serves it: decoded into the
// typed object, with what the server and other controllers add.
func live(t *testing.T, c child) any {
	t.Helper()
	obj := c.newLive()
	mustDecode(t, mustEncode(t, c.desired), obj)
	addServerFields(obj)
	return obj
}

// addServerFields adds what a stored object has besides what handroll
// applied: defaults, managedFields, status, other managers' fields.
func addServerFields(obj any) {
	now := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	m := obj.(metav1.Object)
	m.SetUID("0a1b2c3d-0000-4000-8000-00000000beef")
	m.SetResourceVersion("12345")
	m.SetGeneration(2)
	m.SetCreationTimestamp(now)
	m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "handroll", Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}})
	a := maps.Clone(m.GetAnnotations())
	a["kubectl.kubernetes.io/last-applied-configuration"] = `{"big":"json"}`
	a["deployment.kubernetes.io/revision"] = "2"
	m.SetAnnotations(a)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}}
		o.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		o.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
		pod := &o.Spec.Template.Spec
		pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
		pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
		pod.SecurityContext = &corev1.PodSecurityContext{}
		for i := range pod.Containers {
			c := &pod.Containers[i]
			c.ImagePullPolicy, c.TerminationMessagePath, c.TerminationMessagePolicy = corev1.PullIfNotPresent, "/dev/termination-log", corev1.TerminationMessageReadFile
		}
		for i := range pod.Volumes {
			if cm := pod.Volumes[i].ConfigMap; cm != nil {
				cm.DefaultMode = ptr.To[int32](420)
			}
		}
		pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar", Image: "mesh/proxy:1", Args: []string{"--a", "--b"}})
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
					Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
					Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-5d8f7c9b6d" has successfully progressed.`},
			}}
	case *corev1.Service:
		o.Spec.ClusterIP, o.Spec.ClusterIPs = "10.96.12.34", []string{"10.96.12.34"}
		o.Spec.IPFamilies, o.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, ptr.To(corev1.IPFamilyPolicySingleStack)
		o.Spec.SessionAffinity, o.Spec.InternalTrafficPolicy = corev1.ServiceAffinityNone, ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		if o.Spec.Type == corev1.ServiceTypeNodePort {
			o.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustDecode(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// trim is what a lister of the children's caches hands out for obj: the
// transform (CompactChild), then, for a child a controller owns, its Child
// decoded.
func trim(t *testing.T, obj any) any {
	t.Helper()
	out, err := handrollcache.CompactChild(obj)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := out.(*handrollcache.Child); ok {
		if out, err = c.Object(); err != nil {
			t.Fatal(err)
		}
	}
	if reflect.TypeOf(out) != reflect.TypeOf(obj) {
		t.Fatalf("TrimChild turned a %T into a %T", obj, out)
	}
	return out
}

func firstDifference(t *testing.T, desired, live any) string {
	t.Helper()
	d, err := webapp.FirstDifference(desired, live)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEveryDesiredFieldSurvivesTrimAndPack: a child that holds what handroll
// applied is still up to date once trimmed and packed, as the children's
// listers hand it out (the contract at CompactChild). Were a field handroll
// sets dropped, FirstDifference would name it: in the operator, an apply on
// every reconcile.
func TestEveryDesiredFieldSurvivesTrimAndPack(t *testing.T) {
	for name, w := range webApps() {
		for _, c := range children(w) {
			t.Run(name+"/"+c.kind, func(t *testing.T) {
				l := live(t, c)
				if d := firstDifference(t, c.desired, l); d != "" {
					t.Fatalf("the untrimmed object differs already at %s", d)
				}
				before := len(mustEncode(t, l))
				trimmed := trim(t, l)
				if d := firstDifference(t, c.desired, trimmed); d != "" {
					t.Errorf("trimmed, it differs from what handroll applies at %s: the transform drops a field handroll sets", d)
				}
				m := trimmed.(metav1.Object)
				if len(m.GetManagedFields()) > 0 || m.GetCreationTimestamp() != (metav1.Time{}) {
					t.Error("managedFields or creationTimestamp kept")
				}
				if _, ok := m.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
					t.Error("the last-applied annotation kept")
				}
				after := len(mustEncode(t, trimmed))
				if after >= before {
					t.Errorf("trimmed %d bytes of JSON, from %d", after, before)
				}
			})
		}
	}
}

// TestTrimChildKeepsDrift: every field handroll sets, changed or removed by
// hand in the live object, is still seen by FirstDifference once trimmed,
// at the same path as untrimmed, so the reconciler applies and reverts it.
// Each leaf of what handroll applies is edited in turn.
func TestTrimChildKeepsDrift(t *testing.T) {
	for name, w := range webApps() {
		for _, c := range children(w) {
			t.Run(name+"/"+c.kind, func(t *testing.T) {
				var liveJSON map[string]any
				mustDecode(t, mustEncode(t, live(t, c)), &liveJSON)
				// The leaves of desired as the typed object stores it.
				stored := c.newLive()
				mustDecode(t, mustEncode(t, c.desired), stored)
				var storedJSON map[string]any
				mustDecode(t, mustEncode(t, stored), &storedJSON)
				delete(storedJSON, "apiVersion")
				delete(storedJSON, "kind")

				edits := 0
				for _, path := range leaves(storedJSON, nil) {
					for _, edit := range []string{"change", "remove"} {
						obj, ok := edited(t, liveJSON, path, edit, c.newLive)
						if !ok {
							continue
						}
						want := firstDifference(t, c.desired, obj)
						if want == "" {
							continue // the edit is not drift (an empty value removed, say)
						}
						edits++
						if got := firstDifference(t, c.desired, trim(t, obj)); got != want {
							t.Errorf("%s %s: FirstDifference trimmed %q, untrimmed %q", edit, pathString(path), got, want)
						}
					}
				}
				if edits < 10 {
					t.Errorf("only %d edits were drift: the test edits the wrong leaves", edits)
				}
				t.Logf("%d hand edits seen through the transform", edits)
			})
		}
	}
}

// leaves are the paths (map keys and list indexes) of every scalar in v.
func leaves(v any, path []any) [][]any {
	switch x := v.(type) {
	case map[string]any:
		var out [][]any
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out = append(out, leaves(x[k], append(slices.Clone(path), k))...)
		}
		return out
	case []any:
		var out [][]any
		for i, e := range x {
			out = append(out, leaves(e, append(slices.Clone(path), i))...)
		}
		return out
	}
	return [][]any{path}
}

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		fmt.Fprintf(&b, ".%v", p)
	}
	return b.String()
}

// edited is a copy of obj (JSON) with the leaf at path changed or removed,
// decoded into the typed object; false when no such object decodes.
func edited(t *testing.T, obj map[string]any, path []any, edit string, newLive func() any) (any, bool) {
	t.Helper()
	var candidates []func(any) (any, bool) // old value → new, or remove
	switch edit {
	case "remove":
		candidates = append(candidates, func(any) (any, bool) { return nil, false })
	default:
		candidates = append(candidates,
			func(old any) (any, bool) {
				switch o := old.(type) {
				case string:
					return o + "x", true
				case float64:
					return o + 1, true
				case bool:
					return !o, true
				}
				return "x", true
			},
			func(old any) (any, bool) { // a string that must parse: a quantity, say
				if old == "2" {
					return "3", true
				}
				return "2", true
			})
	}
	for _, replace := range candidates {
		var cp map[string]any
		mustDecode(t, mustEncode(t, obj), &cp)
		if !setPath(cp, path, replace) {
			t.Fatalf("%s is in desired but not in the live object", pathString(path))
		}
		out := newLive()
		if err := json.Unmarshal(mustEncode(t, cp), out); err == nil {
			return out, true
		}
	}
	return nil, false
}

// setPath replaces (or, when replace says so, removes) the leaf at path.
// The live object holds desired's list elements at desired's indexes
// (addServerFields only appends), so indexes carry over.
func setPath(v any, path []any, replace func(any) (any, bool)) bool {
	switch x := v.(type) {
	case map[string]any:
		k := path[0].(string)
		old, ok := x[k]
		if !ok {
			return false
		}
		if len(path) > 1 {
			return setPath(old, path[1:], replace)
		}
		if nv, keep := replace(old); keep {
			x[k] = nv
		} else {
			delete(x, k)
		}
		return true
	case []any:
		i := path[0].(int)
		switch {
		case i >= len(x):
			return false
		case len(path) > 1:
			return setPath(x[i], path[1:], replace)
		}
		if nv, keep := replace(x[i]); keep {
			x[i] = nv
		} else {
			x[i] = nil
		}
		return true
	}
	return false
}

// TestTrimChildTombstone: a tombstone passes as it is; its object came from
// the cache, trimmed already.
func TestTrimChildTombstone(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "a/web", Obj: &appsv1.Deployment{}}
	out, err := handrollcache.TrimChild(tomb)
	if err != nil || !reflect.DeepEqual(out, tomb) {
		t.Fatalf("TrimChild(tombstone) = %#v, %v", out, err)
	}
}

// sizes says how big obj is as JSON and, roughly, in memory.
func sizes(t *testing.T, obj any) string {
	proto := ""
	if p, ok := obj.(interface{ Size() int }); ok {
		proto = fmt.Sprintf(" / %d B protobuf", p.Size())
	}
	return fmt.Sprintf("%d B JSON%s / ~%d B in memory", len(mustEncode(t, obj)), proto, memSize(reflect.ValueOf(obj)))
}

// memSize estimates the bytes v holds: its own size and what it points to
// (string bytes, slices' backing arrays, map entries; not the maps' own
// buckets, nor allocator rounding). Time zones are shared, not counted.
func memSize(v reflect.Value) uintptr {
	return v.Type().Size() + pointedSize(v)
}

var locationType = reflect.TypeFor[time.Location]()

func pointedSize(v reflect.Value) uintptr {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() || v.Kind() == reflect.Pointer && v.Type().Elem() == locationType {
			return 0
		}
		return memSize(v.Elem())
	case reflect.String:
		return uintptr(v.Len())
	case reflect.Slice:
		if v.IsNil() {
			return 0
		}
		n := uintptr(v.Cap()) * v.Type().Elem().Size()
		for i := range v.Len() {
			n += pointedSize(v.Index(i))
		}
		return n
	case reflect.Array:
		var n uintptr
		for i := range v.Len() {
			n += pointedSize(v.Index(i))
		}
		return n
	case reflect.Map:
		var n uintptr
		for it := v.MapRange(); it.Next(); {
			n += memSize(it.Key()) + memSize(it.Value())
		}
		return n
	case reflect.Struct:
		var n uintptr
		for i := range v.NumField() {
			n += pointedSize(v.Field(i))
		}
		return n
	}
	return 0
}

// TestTrimChildSize logs what a typical child costs before and after the
// transform (see TestTrimmedCacheAgainstAPIServer for the API server's own
// objects), and fails should the transform stop saving.
func TestTrimChildSize(t *testing.T) {
	w := maximalWebApp("team-a")
	handrollv1.SetObjectDefaults_WebApp(w)
	for _, c := range children(w) {
		l := live(t, c)
		stripped, _ := handrollcache.StripForCache(reflect.ValueOf(l).MethodByName("DeepCopy").Call(nil)[0].Interface())
		trimmed := trim(t, l)
		t.Logf("%s: %s after StripForCache, %s trimmed", c.kind, sizes(t, stripped), sizes(t, trimmed))
		if c.kind != "ConfigMap" && memSize(reflect.ValueOf(trimmed)) >= memSize(reflect.ValueOf(stripped)) {
			t.Errorf("%s: the transform saves nothing", c.kind)
		}
	}
}
