package webapp

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
)

// TestCacheSyncErrorNamesTheInformer: a user without RBAC to list cannot
// sync; the error says which informer and why, not only "timed out".
func TestCacheSyncErrorNamesTheInformer(t *testing.T) {
	if env == nil {
		t.Skip("needs the local control plane")
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody-in-particular"}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := handrollcache.New(kube, hr, meta, handrollcache.Options{})
	c.WebApps()
	c.Deployments()
	c.Metadata(handrollcache.ConfigMapsResource)
	stop := make(chan struct{})
	defer func() { close(stop); c.Shutdown() }()
	c.Start(stop)

	ctx, cancel := budget.Context(t, context.Background(), 5*time.Second, "the caches to fail their sync")
	defer cancel()
	err = c.WaitForSync(ctx)
	if err == nil {
		t.Fatal("caches synced for a user with no permission to list")
	}
	for _, want := range []string{
		"handroll.dev/v1 WebApps in all namespaces did not sync",
		"apps/v1 Deployments in all namespaces did not sync",
		"v1 configmaps (metadata) in all namespaces did not sync",
		"forbidden",
		"nobody-in-particular",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// TestNamespacesFlag: with --namespaces, WebApps elsewhere are not touched.
func TestNamespacesFlag(t *testing.T) {
	watched, ignored := env.Namespace(t), env.Namespace(t)
	startOperator(t, "--namespaces="+watched)
	for _, ns := range []string{watched, ignored} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	converged(t, watched, "web")
	// The watched one converged; give the other the same time again.
	time.Sleep(3 * time.Second)
	w, err := handrollClient(t).HandrollV1().WebApps(ignored).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.ObservedGeneration != 0 || len(w.Finalizers) != 0 {
		t.Errorf("a WebApp outside --namespaces was reconciled: %s", asJSON(w))
	}
	if _, err := kubeClient(t).AppsV1().Deployments(ignored).Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was made outside --namespaces: %v", err)
	}
	// Without a namespace controller here, the namespace's deletion leaves
	// the WebApp behind for later tests' operators, which could then never
	// create its children in a terminating namespace. It has no finalizer:
	// delete it now.
	if err := handrollClient(t).HandrollV1().WebApps(ignored).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
