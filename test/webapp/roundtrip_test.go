package webapp

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// everyFieldSpecs are WebApp specs that, between them, use every field the
// desired children are built from, at every class of value: empty, zero,
// absent, and ordinary. (env valueFrom.fileKeyRef is left out: it needs a
// volume of the pod's own, which a WebApp cannot declare.)
func everyFieldSpecs() map[string]handrollv1.WebAppSpec {
	q := resource.MustParse
	return map[string]handrollv1.WebAppSpec{
		"full": {
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](0),
			Port:     ptr.To[int32](9090),
			Env: []corev1.EnvVar{
				{Name: "EMPTY", Value: ""},
				{Name: "PLAIN", Value: "x"},
				{Name: "SPACE", Value: " "},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.memory", Divisor: q("1Mi")}}},
				{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}},
				{Name: "CM_OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: ptr.To(false)}}},
				{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k", Optional: ptr.To(true)}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("0"), corev1.ResourceMemory: q("1.5Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1000m"), corev1.ResourceMemory: q("2Gi")},
			},
			Config:       map[string]string{"empty": "", "k": "v"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "user-config"},
			Service:      &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](8080)},
		},
		"minimal": {
			Image: "nginx:1.27",
		},
		"nodeport-allocated": {
			Image:     "nginx:1.27",
			Replicas:  ptr.To[int32](3),
			Env:       []corev1.EnvVar{{Name: "ONLY_EMPTY"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m")}},
			Service:   &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort)},
		},
		"nodeport-fixed": {
			Image:     "nginx:1.27",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("64Mi")}},
			Config:    map[string]string{"only": ""},
			Service:   &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](81), NodePort: 31999},
		},
	}
}

// TestDesiredChildrenSurviveTheRoundTrip: each desired child, applied by
// server-side apply and read back, is up to date. Otherwise the reconciler
// would apply it again on every reconcile.
func TestDesiredChildrenSurviveTheRoundTrip(t *testing.T) {
	ctx := context.Background()
	kube := kubeClient(t)
	opts := metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}
	for name, spec := range everyFieldSpecs() {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			w := &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns, UID: types.UID("0b2c3d4e-0000-4000-8000-" + fmt.Sprintf("%012d", len(name)))},
				Spec:       spec,
			}
			ref := &corev1.ConfigMap{Data: map[string]string{"from": "ref"}, BinaryData: map[string][]byte{"bin": {0}}}

			if cm := webapp.DesiredConfigMap(w); cm != nil {
				if _, err := kube.CoreV1().ConfigMaps(ns).Apply(ctx, cm, opts); err != nil {
					t.Fatalf("applying the ConfigMap: %v", err)
				}
				live, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, *cm.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				requireUpToDate(t, "ConfigMap", cm, live)
			}

			svc := webapp.DesiredService(w)
			if _, err := kube.CoreV1().Services(ns).Apply(ctx, svc, opts); err != nil {
				t.Fatalf("applying the Service: %v", err)
			}
			liveSvc, err := kube.CoreV1().Services(ns).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			requireUpToDate(t, "Service", svc, liveSvc)

			dep := webapp.DesiredDeployment(w, ref)
			if _, err := kube.AppsV1().Deployments(ns).Apply(ctx, dep, opts); err != nil {
				t.Fatalf("applying the Deployment: %v", err)
			}
			liveDep, err := kube.AppsV1().Deployments(ns).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			requireUpToDate(t, "Deployment", dep, liveDep)
		})
	}
}

func requireUpToDate(t *testing.T, kind string, desired any, live metav1.Object) {
	t.Helper()
	diff, err := webapp.FirstDifference(desired, live)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if diff != "" {
		t.Errorf("%s as the API server stored it differs from the desired state at %s\ndesired: %s\nlive:    %s", kind, diff, asJSON(desired), asJSON(live))
	}
}

// TestNoWritesWhenChildrenChangeStatus: once a WebApp that uses every field
// has converged, the reconciles that its Deployment's status changes cause
// (as pod readiness does) write nothing.
func TestNoWritesWhenChildrenChangeStatus(t *testing.T) {
	op, _ := startOperator(t, "--v=3") // to log why a child is applied
	ns := env.Namespace(t)
	ctx := context.Background()
	if _, err := kubeClient(t).CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "user-config", Namespace: ns},
		Data:       map[string]string{"from": "ref"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, spec := range everyFieldSpecs() {
		if name == "nodeport-fixed" {
			spec.Service.NodePort = 31998 // not the one the round-trip test holds
		}
		createWebApp(t, &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
		names = append(names, name)
	}
	for _, name := range names {
		converged(t, ns, name)
	}
	eventually(t, "the operator settles", func(ctx context.Context) (bool, error) {
		before := operator.Writes(op.Requests(t))
		time.Sleep(3 * time.Second)
		return operator.Writes(op.Requests(t)) == before, nil
	})

	before, reconcilesBefore := op.Requests(t), counter(op, t, "controller_runtime_reconcile_total")
	const rounds = 3
	for i := range rounds {
		for _, name := range names {
			// What the deployment controller does as pods come and go: a
			// status change that leaves the WebApp's own status as it is.
			eventually(t, "updating the Deployment's status", func(ctx context.Context) (bool, error) {
				d, err := kubeClient(t).AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				d.Status.Conditions = []appsv1.DeploymentCondition{{
					Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
					Reason: "MinimumReplicasAvailable", Message: fmt.Sprintf("round %d", i),
					LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
				}}
				_, err = kubeClient(t).AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
				return err == nil, nil
			})
		}
	}
	want := reconcilesBefore + float64(rounds*len(names))
	eventually(t, "the status changes are reconciled", func(context.Context) (bool, error) {
		return counter(op, t, "controller_runtime_reconcile_total") >= want, nil
	})
	time.Sleep(2 * time.Second) // for anything those reconciles would still send
	after := op.Requests(t)
	if w := operator.Writes(after) - operator.Writes(before); w != 0 {
		t.Errorf("%v writes for %d status-only changes of the children; requests before %v, after %v", w, rounds*len(names), before, after)
		for _, line := range strings.Split(op.Log(), "\n") {
			if strings.Contains(line, "differs") {
				t.Log(line)
			}
		}
	}
	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}

// TestReferencedBinaryDataRollsThePods: changing only the binaryData of the
// spec.configMapRef ConfigMap changes the pod template's config hash.
func TestReferencedBinaryDataRollsThePods(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"x": "1"},
		BinaryData: map[string][]byte{"cert.der": {0x30, 0x82, 0x01}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", ConfigMapRef: &handrollv1.ConfigMapReference{Name: "settings"}},
	})
	converged(t, ns, "web")
	hash := func() string {
		return getDeployment(t, ns, "web").Spec.Template.Annotations[webapp.AnnotationConfigHash]
	}
	before := hash()

	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["cert.der"] = []byte{0x30, 0x82, 0x02}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The operator reconciles the WebApp as soon as its informer sees the
	// change; allow it ample time, then require the new hash.
	ctx2, cancel := budget.Context(t, ctx, 15*time.Second, "the config hash to change with the binary data")
	defer cancel()
	for ctx2.Err() == nil && hash() == before {
		time.Sleep(200 * time.Millisecond)
	}
	if after := hash(); after == before {
		t.Errorf("changing the referenced ConfigMap's binaryData left the pod template's %s at %s", webapp.AnnotationConfigHash, after)
	}
}

// TestReferenceToAConfigMapOfOursRollsThePods: a spec.configMapRef may name
// a ConfigMap labelled as handroll's (another WebApp's config), which the
// operator caches whole rather than as metadata: its data still goes into
// the hash, and a change of it still rolls the pods.
func TestReferenceToAConfigMapOfOursRollsThePods(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "source", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Config: map[string]string{"level": "info"}},
	})
	converged(t, ns, "source")
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Spec: handrollv1.WebAppSpec{Image: "nginx:1.27",
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: handrollv1.OwnedConfigMapName("source")}},
	})
	converged(t, ns, "reader")
	hash := func() string {
		return getDeployment(t, ns, "reader").Spec.Template.Annotations[webapp.AnnotationConfigHash]
	}
	if want := webapp.ConfigHash(nil, &corev1.ConfigMap{Data: map[string]string{"level": "info"}}); hash() != want {
		t.Fatalf("the reader's config hash is %s, want %s: the data of the ConfigMap it names", hash(), want)
	}

	updateWebApp(t, ns, "source", func(w *handrollv1.WebApp) { w.Spec.Config = map[string]string{"level": "debug"} })
	want := webapp.ConfigHash(nil, &corev1.ConfigMap{Data: map[string]string{"level": "debug"}})
	ctx2, cancel := budget.Context(t, ctx, 15*time.Second, "the reader's config hash to follow the named ConfigMap")
	defer cancel()
	for ctx2.Err() == nil && hash() != want {
		time.Sleep(200 * time.Millisecond)
	}
	if got := hash(); got != want {
		t.Errorf("after the named ConfigMap changed, the reader's config hash is %s, want %s", got, want)
	}
}
