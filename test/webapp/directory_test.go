package webapp

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	"github.com/handroll/handroll/test/operator"
)

// legacyFinalizer is the finalizer the first version of the directory put on
// every WebApp; spelled out here, as exported YAML and old objects carry it.
const legacyFinalizer = "handroll.dev/directory"

// directoryData reads the directory ConfigMap from the API server; nil when
// it does not exist.
func directoryData(t *testing.T, ctx context.Context, opNS string) (map[string]string, error) {
	t.Helper()
	cm, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}

// directoryBecomes waits until the directory holds exactly want (an absent
// directory counts as empty), then checks that it stays so for a while: a
// leaked or missing entry that a late write brings back is caught too.
func directoryBecomes(t *testing.T, opNS string, want map[string]string) {
	t.Helper()
	var got map[string]string
	exact := func(ctx context.Context) (bool, error) {
		var err error
		got, err = directoryData(t, ctx, opNS)
		if err != nil {
			return false, err
		}
		return maps.Equal(got, want) || (len(got) == 0 && len(want) == 0), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if ok, err := exact(ctx); err == nil && ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the directory is not exact:\n got %v\nwant %v", got, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second)
	if ok, err := exact(context.Background()); err != nil || !ok {
		t.Fatalf("the directory changed after it was exact (%v):\n got %v\nwant %v", err, got, want)
	}
}

func gone(t *testing.T, ns, name string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			t.Logf("%s/%s: deletionTimestamp %v, finalizers %v", ns, name, w.DeletionTimestamp, w.Finalizers)
		}
		return false, err
	}
}

// TestRestoredWebAppWithTheOldFinalizerIsDeleted: a WebApp created with
// handroll.dev/directory already in metadata.finalizers (kubectl create -f
// of exported YAML, a backup restore: the finalizer is owned by another
// field manager) is released on delete, and leaves the directory.
func TestRestoredWebAppWithTheOldFinalizerIsDeleted(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	ctx := context.Background()
	_, err := handrollClient(t).HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns, Finalizers: []string{legacyFinalizer}},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	w := converged(t, ns, "restored")
	directoryBecomes(t, opNS, map[string]string{webapp.DirectoryKey(ns, "restored"): w.Status.URL})

	if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(ctx, "restored", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restored WebApp is deleted", gone(t, ns, "restored"))
	directoryBecomes(t, opNS, nil)
}

// TestQuickCreateAndDeleteLeaveTheDirectoryExact: WebApps created and
// deleted at once, many at a time, whatever the timing between the writes
// and the cache, leave no entry behind; the WebApps that stay are listed.
func TestQuickCreateAndDeleteLeaveTheDirectoryExact(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	client := handrollClient(t).HandrollV1().WebApps(ns)
	want := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("stays-%d", i)
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
		want[webapp.DirectoryKey(ns, name)] = "http://" + name + "." + ns + ".svc:80"
	}

	const cycles = 50
	var wg sync.WaitGroup
	errs := make(chan error, cycles)
	for i := range cycles {
		wg.Go(func() {
			ctx := context.Background()
			name := fmt.Sprintf("brief-%d", i)
			for round := range 2 {
				if _, err := client.Create(ctx, &handrollv1.WebApp{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
				}, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s (round %d): %w", name, round, err)
					return
				}
				// Let some live long enough to be listed, others not.
				time.Sleep(time.Duration(i%10) * 40 * time.Millisecond)
				if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
					return
				}
				if round == 0 {
					// Same name again, once the first is gone.
					for {
						if _, err := client.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range cycles {
		eventually(t, "brief WebApps are deleted", gone(t, ns, fmt.Sprintf("brief-%d", i)))
	}
	directoryBecomes(t, opNS, want)
}

// TestUpgradeStripsTheOldFinalizer starts the operator on objects written by
// the first version, which kept the directory with a finalizer applied by
// field manager "handroll": one WebApp carries it, one carries it co-owned
// by another manager, one is being deleted with it, and the directory lists
// a WebApp that no longer exists. Every finalizer goes, the deleted WebApp
// with it, and the directory ends exact.
func TestUpgradeStripsTheOldFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	opNS := env.Namespace(t)
	client := handrollClient(t).HandrollV1().WebApps(ns)
	for _, name := range []string{"plain", "coowned", "deleting"} {
		w := createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
		// As the first version applied it.
		ac := handrollac.WebApp(name, ns).WithUID(w.UID).WithFinalizers(legacyFinalizer)
		if _, err := client.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}); err != nil {
			t.Fatal(err)
		}
		if name == "coowned" {
			if _, err := client.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "restore-tool", Force: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := client.Delete(ctx, "deleting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	for _, name := range []string{"plain", "coowned", "deleting", "long-gone"} {
		old[webapp.DirectoryKey(ns, name)] = "http://" + name + "." + ns + ".svc:80"
	}
	if _, err := kubeClient(t).CoreV1().ConfigMaps(opNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Labels: map[string]string{
			webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory",
		}},
		Data: old,
	}, metav1.CreateOptions{FieldManager: webapp.FieldManager}); err != nil {
		t.Fatal(err)
	}

	operator.Start(t, env.Kubeconfig, "--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS, "--namespaces="+ns)

	eventually(t, "the WebApp being deleted is released", gone(t, ns, "deleting"))
	for _, name := range []string{"plain", "coowned"} {
		eventually(t, name+" loses the old finalizer", func(ctx context.Context) (bool, error) {
			w, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(w.Finalizers) == 0, nil
		})
	}
	directoryBecomes(t, opNS, map[string]string{
		webapp.DirectoryKey(ns, "plain"):   "http://plain." + ns + ".svc:80",
		webapp.DirectoryKey(ns, "coowned"): "http://coowned." + ns + ".svc:80",
	})
}

// TestForeignServiceIsNotAdvertised: when the Service's name is taken by an
// object the WebApp does not control, nothing points at it: status.url is
// empty and the directory has no entry. Once the foreign Service goes, the
// WebApp's own Service is made and advertised.
func TestForeignServiceIsNotAdvertised(t *testing.T) {
	ns := env.Namespace(t)
	_, opNS := startOperator(t, "--namespaces="+ns)
	kube := kubeClient(t)
	ctx := context.Background()
	// Labelled as ours, so that it is in the operator's (filtered) cache:
	// only the controller reference tells it is not.
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{webapp.LabelManagedBy: webapp.ManagedBy}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "other"} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	var w *handrollv1.WebApp
	eventually(t, "the WebApp reports the conflict", func(ctx context.Context) (bool, error) {
		var err error
		w, err = handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
		return c != nil && c.Reason == webapp.ReasonResourceConflict, nil
	})
	if w.Status.URL != "" {
		t.Errorf("status.url %q advertises a Service the WebApp does not control", w.Status.URL)
	}
	// "other" is listed: the directory has been written, and without "web".
	directoryBecomes(t, opNS, map[string]string{webapp.DirectoryKey(ns, "other"): "http://other." + ns + ".svc:80"})

	if err := kube.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	url := "http://web." + ns + ".svc:80"
	eventually(t, "the WebApp heals and shows its URL", func(ctx context.Context) (bool, error) {
		w, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && w.Status.URL == url, err
	})
	directoryBecomes(t, opNS, map[string]string{
		webapp.DirectoryKey(ns, "other"): "http://other." + ns + ".svc:80",
		webapp.DirectoryKey(ns, "web"):   url,
	})
}
