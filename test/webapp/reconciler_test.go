package webapp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// These tests run bin/handroll as a separate process against the package's
// API server. There is no controller-manager here, so Deployments never
// report ready pods; readiness is covered by the end-to-end tests.

func kubeClient(t *testing.T) kubernetes.Interface { return env.KubeClient(t) }

// startOperator runs handroll with its directory in a namespace of its own.
func startOperator(t *testing.T, args ...string) (*operator.Operator, string) {
	t.Helper()
	opNS := env.Namespace(t)
	return operator.Start(t, env.Kubeconfig, append([]string{
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
	}, args...)...), opNS
}

// eventually polls cond every 100ms for up to 30s (scaled) and fails t
// with what describe says when it never holds.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := budget.Context(t, context.Background(), 30*time.Second, what)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		t.Fatalf("%s: %v", what, budget.Err(ctx, err))
	}
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := kubeClient(t).AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Deployment %s/%s: %v", ns, name, err)
	}
	return d
}

// converged waits until the WebApp's status describes its current
// generation and its Deployment exists.
func converged(t *testing.T, ns, name string) *handrollv1.WebApp {
	t.Helper()
	var w *handrollv1.WebApp
	eventually(t, "WebApp "+ns+"/"+name+" converges", func(ctx context.Context) (bool, error) {
		var err error
		w, err = handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = kubeClient(t).AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return w.Status.ObservedGeneration == w.Generation && err == nil, nil
	})
	return w
}

func createWebApp(t *testing.T, w *handrollv1.WebApp) *handrollv1.WebApp {
	t.Helper()
	created, err := handrollClient(t).HandrollV1().WebApps(w.Namespace).Create(context.Background(), w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating WebApp: %v", err)
	}
	return created
}

func updateWebApp(t *testing.T, ns, name string, mutate func(*handrollv1.WebApp)) {
	t.Helper()
	eventually(t, "updating WebApp "+name, func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(w)
		_, err = handrollClient(t).HandrollV1().WebApps(ns).Update(ctx, w, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func TestReconcileCreatesChildren(t *testing.T) {
	_, opNS := startOperator(t)
	ns := env.Namespace(t)
	w := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](3),
			Env:      []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
			Config:   map[string]string{"app.yaml": "a: 1"},
		},
	})
	got := converged(t, ns, "shop")

	d := getDeployment(t, ns, "shop")
	if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("Deployment spec: replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	svc, err := kubeClient(t).CoreV1().Services(ns).Get(context.Background(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := kubeClient(t).CoreV1().ConfigMaps(ns).Get(context.Background(), "shop-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["app.yaml"] != "a: 1" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	for _, child := range []metav1.Object{d, svc, cm} {
		ref := metav1.GetControllerOf(child)
		if ref == nil || ref.UID != w.UID || ref.Kind != "WebApp" {
			t.Errorf("%s: controller reference %+v, want the WebApp", child.GetName(), ref)
		}
		if child.GetLabels()[webapp.LabelManagedBy] != "handroll" {
			t.Errorf("%s: labels %v", child.GetName(), child.GetLabels())
		}
		var managers []string
		for _, mf := range child.GetManagedFields() {
			managers = append(managers, mf.Manager+"/"+string(mf.Operation))
		}
		if !slices.Contains(managers, "handroll/Apply") {
			t.Errorf("%s: field managers %v, want handroll/Apply (server-side apply)", child.GetName(), managers)
		}
	}
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v: the directory needs none", got.Finalizers)
	}
	if got.Status.URL != "http://shop."+ns+".svc:80" || got.Status.Selector == "" {
		t.Errorf("status %s", asJSON(got.Status))
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, handrollv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready condition %+v: without a controller-manager no pod is ready", c)
	}
	eventually(t, "the directory lists the WebApp", func(ctx context.Context) (bool, error) {
		dir, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && dir.Data[webapp.DirectoryKey(ns, "shop")] == got.Status.URL, err
	})
}

func TestUpdatesRollTheChildren(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Config: map[string]string{"k": "1"}},
	})
	converged(t, ns, "web")
	hash := func() string {
		return getDeployment(t, ns, "web").Spec.Template.Annotations[webapp.AnnotationConfigHash]
	}
	h0 := hash()

	// Image and replicas.
	updateWebApp(t, ns, "web", func(w *handrollv1.WebApp) { w.Spec.Image = "nginx:1.28"; w.Spec.Replicas = ptr.To[int32](4) })
	eventually(t, "the Deployment follows image and replicas", func(ctx context.Context) (bool, error) {
		d := getDeployment(t, ns, "web")
		return *d.Spec.Replicas == 4 && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.28", nil
	})

	// spec.config: the ConfigMap changes, and the pod template's hash with it.
	updateWebApp(t, ns, "web", func(w *handrollv1.WebApp) { w.Spec.Config["k"] = "2" })
	eventually(t, "spec.config rolls the pods", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
		return err == nil && cm.Data["k"] == "2" && hash() != h0, nil
	})
	h1 := hash()

	// spec.configMapRef: a user's ConfigMap, then a change to its data.
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"x": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	updateWebApp(t, ns, "web", func(w *handrollv1.WebApp) {
		w.Spec.ConfigMapRef = &handrollv1.ConfigMapReference{Name: "settings"}
	})
	eventually(t, "the referenced ConfigMap is mounted", func(ctx context.Context) (bool, error) {
		d := getDeployment(t, ns, "web")
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == "settings" {
				return hash() != h1, nil
			}
		}
		return false, nil
	})
	h2 := hash()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["x"] = "2"
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a change to the referenced ConfigMap rolls the pods", func(ctx context.Context) (bool, error) {
		return hash() != h2, nil
	})

	// Emptying spec.config deletes the ConfigMap it rendered.
	updateWebApp(t, ns, "web", func(w *handrollv1.WebApp) { w.Spec.Config = nil })
	eventually(t, "the owned ConfigMap goes with spec.config", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestDriftIsRepaired(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2)},
	})
	converged(t, ns, "web")

	d := getDeployment(t, ns, "web")
	d.Spec.Replicas = ptr.To[int32](9)
	d.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
	if _, err := kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a hand-edited Deployment is restored", func(ctx context.Context) (bool, error) {
		d := getDeployment(t, ns, "web")
		return *d.Spec.Replicas == 2 && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27", nil
	})

	svc, err := kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a deleted Service is recreated", func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && s.UID != svc.UID, nil
	})

	// Without our labels the Deployment leaves the filtered cache; the
	// metadata cache still shows it is ours, so it is applied again rather
	// than reported as a foreign object.
	d = getDeployment(t, ns, "web")
	uid := d.UID
	d.Labels = nil
	if _, err := kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a Deployment stripped of its labels gets them back", func(ctx context.Context) (bool, error) {
		d := getDeployment(t, ns, "web")
		return d.UID == uid && d.Labels[webapp.LabelManagedBy] == webapp.ManagedBy, nil
	})
}

func TestScaleThroughTheSubresource(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "web")
	ctx := context.Background()
	scale, err := handrollClient(t).HandrollV1().WebApps(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5
	if _, err := handrollClient(t).HandrollV1().WebApps(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kubectl scale reaches the Deployment", func(ctx context.Context) (bool, error) {
		return *getDeployment(t, ns, "web").Spec.Replicas == 5, nil
	})
}

// TestForeignObjectIsNeverOverwritten: a Service named like the WebApp, which
// the WebApp does not control, is left exactly as it was; the WebApp says so
// in its status and an event, and heals once the object is gone.
func TestForeignObjectIsNeverOverwritten(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()
	foreign, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"team": "other"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "theirs"},
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	eventually(t, "the WebApp reports the conflict", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
		stalled := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == webapp.ReasonResourceConflict &&
			strings.Contains(c.Message, "Service "+ns+"/web") &&
			stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == webapp.ReasonResourceConflict, nil
	})
	// Each retry records the Warning again: the repeats (of the WebApp at
	// one resourceVersion) are one Event's series, patched on the server.
	eventually(t, "a Warning event names the conflict, its repeats counted in its series", func(ctx context.Context) (bool, error) {
		evs, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == webapp.EventResourceConflict && e.Type == corev1.EventTypeWarning && e.Regarding.Name == "web" &&
				e.Series != nil && e.Series.Count >= 2 {
				return true, nil
			}
		}
		return false, nil
	})

	// The operator keeps retrying (with backoff); give it time to misbehave.
	time.Sleep(2 * time.Second)
	now, err := kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != foreign.ResourceVersion || len(now.OwnerReferences) != 0 {
		t.Fatalf("the foreign Service was modified: resourceVersion %s -> %s, owners %v",
			foreign.ResourceVersion, now.ResourceVersion, now.OwnerReferences)
	}
	// The other children are still made: only the taken name is skipped.
	getDeployment(t, ns, "web")

	if err := kube.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the WebApp heals once the foreign Service is gone", func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not recreated yet: poll again until the timeout
		}
		ref := metav1.GetControllerOf(s)
		return ref != nil && ref.Kind == "WebApp", nil
	})
	eventually(t, "the WebApp is no longer Stalled", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionStalled) == nil, nil
	})
}

// TestDeletedWebAppLeavesTheDirectory: the directory controller removes a
// deleted WebApp's entry and keeps the others.
func TestDeletedWebAppLeavesTheDirectory(t *testing.T) {
	_, opNS := startOperator(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	directory := func(ctx context.Context) map[string]string {
		cm, err := kube.CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm.Data
	}
	eventually(t, "both WebApps are listed", func(ctx context.Context) (bool, error) {
		d := directory(ctx)
		return d[webapp.DirectoryKey(ns, "a")] != "" && d[webapp.DirectoryKey(ns, "b")] != "", nil
	})
	if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted WebApp leaves the directory", func(ctx context.Context) (bool, error) {
		d := directory(ctx)
		_, listed := d[webapp.DirectoryKey(ns, "a")]
		return !listed, nil
	})
	if d := directory(ctx); d[webapp.DirectoryKey(ns, "b")] == "" {
		t.Errorf("the directory lost the other WebApp: %v", d)
	}
}

// TestRapidUpdatesConverge: updates faster than the operator can reconcile
// end with one Deployment holding the last spec, and no reconcile failed
// (no AlreadyExists or conflict loops from reading its own stale cache).
func TestRapidUpdatesConverge(t *testing.T) {
	op, _ := startOperator(t)
	ns := env.Namespace(t)
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	for i := 1; i <= 20; i++ {
		updateWebApp(t, ns, "web", func(w *handrollv1.WebApp) { w.Spec.Replicas = ptr.To(int32(i)) })
	}
	eventually(t, "the last update wins", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return w.Status.ObservedGeneration == w.Generation && *getDeployment(t, ns, "web").Spec.Replicas == 20, nil
	})
	list, err := kubeClient(t).AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d Deployments, want 1", len(list.Items))
	}
	if errs := counter(op, t, "controller_runtime_reconcile_errors_total"); errs != 0 {
		t.Errorf("%v reconcile errors during rapid updates:\n%s", errs, op.Log())
	}
}

// TestNoWritesWhenIdle: after convergence, with informers resyncing every
// two seconds, a twelve-second window sees reconciles but not one write.
func TestNoWritesWhenIdle(t *testing.T) {
	op, _ := startOperator(t, "--sync-period=2s")
	ns := env.Namespace(t)
	for i := range 5 {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Config: map[string]string{"k": "v"}},
		})
	}
	for i := range 5 {
		converged(t, ns, fmt.Sprintf("web-%d", i))
	}
	// Let whatever the operator still had queued (other tests' leftovers
	// included) settle: wait for three quiet seconds.
	eventually(t, "the operator settles", func(ctx context.Context) (bool, error) {
		before := operator.Writes(op.Requests(t))
		time.Sleep(3 * time.Second)
		return operator.Writes(op.Requests(t)) == before, nil
	})

	before, reconcilesBefore := op.Requests(t), counter(op, t, "controller_runtime_reconcile_total")
	time.Sleep(12 * time.Second)
	after, reconcilesAfter := op.Requests(t), counter(op, t, "controller_runtime_reconcile_total")

	if reconcilesAfter <= reconcilesBefore {
		t.Fatalf("no reconcile ran in the window (%v -> %v): resyncs did not happen, so the window proves nothing", reconcilesBefore, reconcilesAfter)
	}
	if w := operator.Writes(after) - operator.Writes(before); w != 0 {
		t.Errorf("%v writes while idle; requests before %v, after %v", w, before, after)
	}
	t.Logf("idle window: %v reconciles, requests %v -> %v", reconcilesAfter-reconcilesBefore, before, after)

	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}

// counter sums every series of a counter family.
func counter(op *operator.Operator, t *testing.T, name string) float64 {
	t.Helper()
	var n float64
	if f, ok := op.Metrics(t)[name]; ok {
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// TestRefusedChildIsReported: when the API server refuses a child (here a
// nodePort another WebApp's Service holds), the WebApp says why in its
// status rather than only in the operator's log.
func TestRefusedChildIsReported(t *testing.T) {
	startOperator(t)
	ns := env.Namespace(t)
	for _, name := range []string{"first", "second"} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: handrollv1.WebAppSpec{
				Image:   "nginx:1.27",
				Service: &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), NodePort: 30123},
			},
		})
		if name == "first" {
			converged(t, ns, name)
		}
	}
	eventually(t, "the second WebApp reports the refusal", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionDegraded)
		stalled := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == webapp.ReasonApplyFailed &&
			strings.Contains(c.Message, "already allocated") &&
			stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == webapp.ReasonApplyFailed, nil
	})

	// The refused WebApp would be retried for ever; later tests count
	// errors and writes, so it goes while the operator still runs.
	if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(context.Background(), "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refused WebApp is deleted", func(ctx context.Context) (bool, error) {
		_, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "second", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
