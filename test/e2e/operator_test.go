package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollclient "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

var (
	opNamespaceOnce sync.Once
	opNamespace     string
)

// operatorNamespace is the operator's own namespace, shared by the tests.
func operatorNamespace(t *testing.T) string {
	opNamespaceOnce.Do(func() {
		ctx, cancel := budget.Context(t, context.Background(), time.Minute, "the operator's namespace")
		defer cancel()
		ns, err := env.CreateNamespace(ctx, "handroll-system")
		if err != nil {
			t.Fatal(err)
		}
		opNamespace = ns
	})
	return opNamespace
}

// TestWebAppBecomesReady runs the operator as a user would and follows a
// WebApp through its life: its pods become ready on kwok's nodes, its status
// says so (to `kubectl wait --for=condition=Ready` and to kstatus too), the
// directory lists it, and deleting it removes everything.
func TestWebAppBecomesReady(t *testing.T) {
	ns := env.Namespace(t)
	op := operator.Start(t, env.Kubeconfig,
		"--operator-namespace="+operatorNamespace(t), "--leader-elect-resource-namespace="+operatorNamespace(t))
	hc, err := handrollclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube := clientset(t)
	ctx, cancel := budget.Context(t, context.Background(), 3*time.Minute, "the WebApp's life: ready, listed, deleted")
	defer cancel()
	before := op.Requests(t)

	createShop(ctx, t, hc, ns)
	// As a script or a CI job waits for it: the real kubectl, until the
	// WebApp's Ready condition is True for its generation.
	kubectlWaitReady(ctx, t, ns)
	w := waitForShopReady(ctx, t, hc, ns)
	// What one WebApp cost, by HTTP method, from creation to Ready with two
	// pods (watch traffic and the initial lists happened before "before").
	settled := waitForQuiet(t, op)
	t.Logf("requests to converge one WebApp (config, 2 replicas) to Ready: %s", requestDiff(before, settled))

	checkReadyShop(ctx, t, w, ns)
	checkShopChildren(ctx, t, kube, ns)
	if err := budget.Poll(ctx, 100*time.Millisecond, 30*time.Second, true, directoryHas(t, kube, ns, true)); err != nil {
		t.Errorf("the directory does not list the WebApp: %v", err)
	}

	deleteShop(ctx, t, hc, ns)
	if err := budget.Poll(ctx, 100*time.Millisecond, 10*time.Second, true, directoryHas(t, kube, ns, false)); err != nil {
		t.Errorf("the directory still lists the deleted WebApp: %v", err)
	}
	checkShopChildrenCollected(ctx, t, kube, ns)

	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("the operator did not exit cleanly on SIGTERM: %v", err)
	}
}

// createShop creates the WebApp "shop": two replicas and a config file, so
// that every kind of child is made.
func createShop(ctx context.Context, t *testing.T, hc handrollclient.Interface, ns string) {
	t.Helper()
	_, err := hc.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](2),
			Config:   map[string]string{"app.yaml": "greeting: hello"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// kubectlWaitReady runs `kubectl wait --for=condition=Ready` on the WebApp
// "shop" and fails the test if it does not succeed.
func kubectlWaitReady(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	waitCmd := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), "--kubeconfig="+env.Kubeconfig,
		"wait", "--for=condition=Ready", "webapp/shop", "-n", ns, "--timeout=2m")
	if out, err := waitCmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl wait --for=condition=Ready: %v\n%s", err, out)
	}
}

// waitForShopReady waits until the WebApp "shop"'s status, for its current
// generation, is Ready with both replicas, and returns it.
func waitForShopReady(ctx context.Context, t *testing.T, hc handrollclient.Interface, ns string) *handrollv1.WebApp {
	t.Helper()
	var w *handrollv1.WebApp
	var err error
	err = budget.Poll(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		w, err = hc.HandrollV1().WebApps(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return w.Status.ObservedGeneration == w.Generation &&
			meta.IsStatusConditionTrue(w.Status.Conditions, handrollv1.ConditionReady) &&
			w.Status.ReadyReplicas == 2, nil
	})
	if err != nil {
		t.Fatalf("the WebApp did not become Ready: %v; status %+v", err, w.Status)
	}
	return w
}

// checkReadyShop checks the Ready WebApp's status fields, and that kstatus
// reads it as Current.
func checkReadyShop(ctx context.Context, t *testing.T, w *handrollv1.WebApp, ns string) {
	t.Helper()
	if w.Status.URL != "http://shop."+ns+".svc:80" || w.Status.Replicas != 2 || w.Status.Selector == "" {
		t.Errorf("status %+v", w.Status)
	}
	// As Flux reads it, once converged: kstatus on the object as served.
	u, err := dynamic.NewForConfigOrDie(env.Config).Resource(handrollv1.SchemeGroupVersion.WithResource("webapps")).
		Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := kstatus.Compute(u); err != nil || res.Status != kstatus.CurrentStatus {
		t.Errorf("kstatus reads the Ready WebApp as %+v (%v), want Current", res, err)
	}
}

// checkShopChildren checks that the WebApp's Deployment, Service and
// ConfigMap exist.
func checkShopChildren(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	for _, get := range []func() error{
		func() error {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "shop", metav1.GetOptions{})
			return err
		},
		func() error { _, err := kube.CoreV1().Services(ns).Get(ctx, "shop", metav1.GetOptions{}); return err },
		func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "shop-config", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
}

// directoryHas is a poll condition: the operator's directory lists the
// WebApp "shop" (want), or does not (!want).
func directoryHas(t *testing.T, kube kubernetes.Interface, ns string, want bool) wait.ConditionWithContextFunc {
	t.Helper()
	return func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(operatorNamespace(t)).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return !want, nil
		}
		if err != nil {
			return false, err
		}
		_, has := cm.Data[webapp.DirectoryKey(ns, "shop")]
		return has == want, nil
	}
}

// deleteShop deletes the WebApp "shop" and waits until it is gone.
func deleteShop(ctx context.Context, t *testing.T, hc handrollclient.Interface, ns string) {
	t.Helper()
	if err := hc.HandrollV1().WebApps(ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := budget.Poll(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1().WebApps(ns).Get(ctx, "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the WebApp was not deleted: %v", err)
	}
}

// checkShopChildrenCollected waits until the garbage collector has removed
// the deleted WebApp's pods and Deployment.
func checkShopChildrenCollected(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	err := budget.Poll(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: webapp.LabelInstance + "=shop"})
		if err != nil {
			return false, err
		}
		_, derr := kube.AppsV1().Deployments(ns).Get(ctx, "shop", metav1.GetOptions{})
		return len(pods.Items) == 0 && apierrors.IsNotFound(derr), nil
	})
	if err != nil {
		t.Errorf("children not garbage-collected: %v", err)
	}
}

// waitForQuiet waits until the operator has made no write for three seconds
// and returns its request counts.
func waitForQuiet(t *testing.T, op *operator.Operator) map[string]float64 {
	t.Helper()
	var last map[string]float64
	err := budget.Poll(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		first := op.Requests(t)
		time.Sleep(3 * time.Second)
		last = op.Requests(t)
		return operator.Writes(first) == operator.Writes(last), nil
	})
	if err != nil {
		t.Fatalf("the operator kept writing: %v", err)
	}
	return last
}

func requestDiff(before, after map[string]float64) string {
	out := ""
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if d := after[m] - before[m]; d != 0 {
			out += fmt.Sprintf("%s=%v ", m, d)
		}
	}
	return out
}
