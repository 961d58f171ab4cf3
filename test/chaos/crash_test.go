package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// TestCrashesLoseNothing kills the operator with SIGKILL at random moments,
// ten times, while 300 WebApps converge and are updated and some deleted.
// Then one operator runs to the end, and the world must be exact: every
// WebApp converged with exactly its children, each child controlled by its
// WebApp, every deleted WebApp gone (the operator holds none back: the
// directory needs no finalizer) and no WebApp carrying the legacy directory
// finalizer, and the directory holding exactly the live WebApps.
func TestCrashesLoseNothing(t *testing.T) {
	const (
		perNamespace = 100
		kills        = 10
	)
	opNS := env.Namespace(t)
	namespaces := []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	hc := env.HandrollClient(t)
	ctx := context.Background()
	// Without leader election a new process reconciles as soon as its
	// caches sync, so the kills land in the middle of the work rather than
	// while a successor waits for a dead leader's Lease to expire.
	args := []string{"--operator-namespace=" + opNS, "--leader-elect=false", "--namespaces=" + strings.Join(namespaces, ",")}

	names := createCrashWebApps(ctx, t, hc, namespaces, perNamespace) // namespace/name

	// Users at work while the operator crashes: updates, and deletions.
	var (
		mu      sync.Mutex
		deleted = map[string]bool{}
		updates int
	)
	stop := make(chan struct{})
	var users sync.WaitGroup
	users.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			key := names[rng.IntN(len(names))]
			mu.Lock()
			gone := deleted[key]
			mu.Unlock()
			if gone {
				continue
			}
			ns, name := splitKey(key)
			if rng.IntN(10) == 0 {
				if err := hc.HandrollV1().WebApps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
					mu.Lock()
					deleted[key] = true
					mu.Unlock()
				}
				continue
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				w, err := hc.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				w.Spec.Replicas = ptr.To(int32(rng.IntN(3)))
				if w.Spec.Config != nil {
					w.Spec.Config["app.conf"] = fmt.Sprintf("v=%d", rng.Int())
				}
				_, err = hc.HandrollV1().WebApps(ns).Update(ctx, w, metav1.UpdateOptions{})
				return err
			})
			if err == nil {
				mu.Lock()
				updates++
				mu.Unlock()
			}
		}
	})

	killRepeatedly(t, kills, args)
	close(stop)
	users.Wait()
	mu.Lock()
	t.Logf("%d kills survived; users made %d updates and %d deletions meanwhile", kills, updates, len(deleted))
	mu.Unlock()

	operator.Start(t, env.Kubeconfig, args...)
	awaitExactAfterCrashes(ctx, t, namespaces, opNS, deleted)
}

// createCrashWebApps creates perNamespace WebApps in each namespace, every
// other one with a config, and returns their namespace/name keys.
func createCrashWebApps(ctx context.Context, t *testing.T, hc versioned.Interface, namespaces []string, perNamespace int) []string {
	t.Helper()
	var names []string
	for _, ns := range namespaces {
		for i := range perNamespace {
			w := &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%03d", i), Namespace: ns},
				Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)},
			}
			if i%2 == 0 {
				w.Spec.Config = map[string]string{"app.conf": fmt.Sprintf("n=%d", i)}
			}
			if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, ns+"/"+w.Name)
		}
	}
	return names
}

// killRepeatedly starts the operator with args and SIGKILLs it, kills
// times, each after a random while.
func killRepeatedly(t *testing.T, kills int, args []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	for k := range kills {
		op := operator.Launch(t, env.Kubeconfig, args...)
		// Anywhere from before the caches sync to deep into reconciling.
		ran := time.Duration(300+rng.IntN(4000)) * time.Millisecond
		time.Sleep(ran)
		_ = op.Stop(t, syscall.SIGKILL, 10*time.Second)
		t.Logf("kill %d, after %s", k+1, ran)
	}
}

// awaitExactAfterCrashes waits until check finds nothing amiss in
// namespaces, with the deleted WebApps gone.
func awaitExactAfterCrashes(ctx context.Context, t *testing.T, namespaces []string, opNS string, deleted map[string]bool) {
	t.Helper()
	err := budget.Poll(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		problems, err := check(ctx, t, namespaces, opNS, deleted)
		if err != nil {
			return false, err
		}
		if len(problems) > 0 {
			t.Logf("not yet: %d problems, first %s", len(problems), problems[0])
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		problems, _ := check(ctx, t, namespaces, opNS, deleted)
		t.Fatalf("after the crashes the world is not exact: %v; %d problems: %v", err, len(problems), problems[:min(len(problems), 20)])
	}
}

func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// check lists what is not as it must be after convergence.
func check(ctx context.Context, t *testing.T, namespaces []string, opNS string, deleted map[string]bool) ([]string, error) {
	hc := env.HandrollClient(t)
	kube := env.KubeClient(t)
	var problems []string
	want := map[string]string{} // directory key → URL
	for _, ns := range namespaces {
		apps, err := hc.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		live := map[string]*handrollv1.WebApp{}
		for i := range apps.Items {
			w := &apps.Items[i]
			key := ns + "/" + w.Name
			if deleted[key] {
				problems = append(problems, key+" was deleted but remains (finalizers "+fmt.Sprint(w.Finalizers)+")")
				continue
			}
			if slices.Contains(w.Finalizers, webapp.LegacyFinalizerDirectory) {
				problems = append(problems, key+" carries the legacy finalizer "+webapp.LegacyFinalizerDirectory)
			}
			live[w.Name] = w
			want[webapp.DirectoryKey(ns, w.Name)] = webapp.URL(w)
			if w.Status.ObservedGeneration != w.Generation {
				problems = append(problems, fmt.Sprintf("%s: observedGeneration %d of %d", key, w.Status.ObservedGeneration, w.Generation))
			}
		}
		children, err := checkChildren(ctx, t, kube, ns, live, deleted)
		if err != nil {
			return nil, err
		}
		problems = append(problems, children...)
	}
	directory, err := checkDirectory(ctx, t, kube, opNS, namespaces, want)
	if err != nil {
		return nil, err
	}
	return append(problems, directory...), nil
}

// checkChildren lists what is not as it must be of the children in ns:
// each controlled by its WebApp of live (or of a deleted one), matching
// its spec, and each live WebApp with exactly its children.
func checkChildren(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string, live map[string]*handrollv1.WebApp, deleted map[string]bool) ([]string, error) {
	t.Helper()
	var problems []string
	selector := webapp.LabelManagedBy + "=" + webapp.ManagedBy
	deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	owned := map[string]int{} // kind/owner → children
	checkOwner := func(kind, name string, refs []metav1.OwnerReference) {
		var ctl *metav1.OwnerReference
		for i := range refs {
			if ptr.Deref(refs[i].Controller, false) {
				ctl = &refs[i]
			}
		}
		if ctl == nil {
			problems = append(problems, fmt.Sprintf("%s %s/%s has no controller", kind, ns, name))
			return
		}
		if w, ok := live[ctl.Name]; ok {
			if w.UID != ctl.UID {
				problems = append(problems, fmt.Sprintf("%s %s/%s is controlled by another %s", kind, ns, name, ctl.Name))
			}
			owned[kind+"/"+ctl.Name]++
		} else if !deleted[ns+"/"+ctl.Name] {
			problems = append(problems, fmt.Sprintf("%s %s/%s is controlled by %s, which never existed", kind, ns, name, ctl.Name))
		}
		// A child of a deleted WebApp is the garbage collector's (not
		// running here): its controller reference is what it needs.
	}
	for _, d := range deps.Items {
		checkOwner("Deployment", d.Name, d.OwnerReferences)
		if w, ok := live[d.Name]; ok && ptr.Deref(d.Spec.Replicas, -1) != ptr.Deref(w.Spec.Replicas, 1) {
			problems = append(problems, fmt.Sprintf("Deployment %s/%s has %d replicas, its WebApp %d", ns, d.Name, ptr.Deref(d.Spec.Replicas, -1), ptr.Deref(w.Spec.Replicas, 1)))
		}
	}
	for _, s := range svcs.Items {
		checkOwner("Service", s.Name, s.OwnerReferences)
	}
	for _, c := range cms.Items {
		checkOwner("ConfigMap", c.Name, c.OwnerReferences)
		if w, ok := live[c.Name[:max(0, len(c.Name)-len("-config"))]]; ok && c.Data["app.conf"] != w.Spec.Config["app.conf"] {
			problems = append(problems, fmt.Sprintf("ConfigMap %s/%s holds %q, its WebApp %q", ns, c.Name, c.Data["app.conf"], w.Spec.Config["app.conf"]))
		}
	}
	for name, w := range live {
		for _, kind := range []string{"Deployment", "Service"} {
			if n := owned[kind+"/"+name]; n != 1 {
				problems = append(problems, fmt.Sprintf("%s/%s has %d %ss", ns, name, n, kind))
			}
		}
		wantCM := 0
		if len(w.Spec.Config) > 0 {
			wantCM = 1
		}
		if n := owned["ConfigMap/"+name]; n != wantCM {
			problems = append(problems, fmt.Sprintf("%s/%s has %d ConfigMaps, want %d", ns, name, n, wantCM))
		}
	}
	return problems, nil
}

// checkDirectory lists what is not as it must be of the directory in opNS:
// it holds exactly want among the keys of namespaces.
func checkDirectory(ctx context.Context, t *testing.T, kube kubernetes.Interface, opNS string, namespaces []string, want map[string]string) ([]string, error) {
	t.Helper()
	var problems []string
	dir, err := kube.CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		problems = append(problems, "no directory")
	case err != nil:
		return nil, err
	default:
		for k, v := range want {
			if dir.Data[k] != v {
				problems = append(problems, fmt.Sprintf("directory %s = %q, want %q", k, dir.Data[k], v))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(dir.Data)) {
			// An operator watching every namespace lists earlier tests'
			// WebApps too: only the keys of namespaces are checked.
			if ns, _, _ := strings.Cut(k, "."); !slices.Contains(namespaces, ns) {
				continue
			}
			if _, ok := want[k]; !ok {
				problems = append(problems, "directory holds "+k+", which is gone")
			}
		}
	}
	return problems, nil
}
