package cache

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta_ "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollfake "github.com/handroll/handroll/pkg/generated/clientset/versioned/fake"
	"github.com/handroll/handroll/test/budget"
)

// These tests cover the routing and filtering logic over fake clientsets;
// behaviour that needs a real API server (RBAC errors naming the informer)
// is tested in test/webapp.

func meta(ns, name string, lbls map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: ns, Name: name, Labels: lbls,
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "someone"}},
	}
}

func startCaches(t *testing.T, o Options) *Caches {
	t.Helper()
	ours := map[string]string{"app.kubernetes.io/managed-by": "handroll"}
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: meta("a", "web", ours)},
		&appsv1.Deployment{ObjectMeta: meta("a", "foreign", nil)},
		&appsv1.Deployment{ObjectMeta: meta("b", "web", ours)},
		&corev1.ConfigMap{ObjectMeta: meta("a", "user-settings", nil)},
		&corev1.ConfigMap{ObjectMeta: meta("ops", "webapp-directory", ours)},
		&corev1.ConfigMap{ObjectMeta: meta("ops", "unrelated", nil)},
	}
	kube := kubefake.NewClientset(objs...)
	var metas []runtime.Object
	for _, o := range objs {
		m, err := meta_.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		kind := "ConfigMap"
		apiVersion := "v1"
		if _, ok := o.(*appsv1.Deployment); ok {
			kind, apiVersion = "Deployment", "apps/v1"
		}
		metas = append(metas, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), Labels: m.GetLabels(), Annotations: m.GetAnnotations()},
		})
	}
	scheme := metadatafake.NewTestScheme()
	for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}} {
		for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
			scheme.AddKnownTypeWithName(gv.WithKind(kind), &metav1.PartialObjectMetadata{})
			scheme.AddKnownTypeWithName(gv.WithKind(kind+"List"), &metav1.PartialObjectMetadataList{})
		}
	}
	metaClient := metadatafake.NewSimpleMetadataClient(scheme, metas...)
	hr := handrollfake.NewClientset(
		&handrollv1.WebApp{ObjectMeta: meta("a", "web", nil)},
		&handrollv1.WebApp{ObjectMeta: meta("b", "web", nil)},
	)
	c := New(kube, hr, metaClient, o)
	c.WebApps()
	c.Deployments()
	c.Services()
	c.ConfigMaps()
	c.Metadata(DeploymentsResource)
	c.Metadata(ConfigMapsResource)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Shutdown() })
	c.Start(stop)
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Second, "the caches to sync")
	defer cancel()
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAllNamespaces(t *testing.T) {
	c := startCaches(t, Options{ChildSelector: "app.kubernetes.io/managed-by=handroll"})
	apps, err := c.WebAppLister().List(labels.Everything())
	if err != nil || len(apps) != 2 {
		t.Fatalf("WebApps %d, err %v; want 2", len(apps), err)
	}
	if _, err := c.DeploymentLister().Deployments("b").Get("web"); err != nil {
		t.Errorf("Deployment b/web: %v", err)
	}
	// The label selector keeps what is not ours out of the cache.
	if _, err := c.DeploymentLister().Deployments("a").Get("foreign"); !apierrors.IsNotFound(err) {
		t.Errorf("an unlabelled Deployment is cached: err %v", err)
	}
	// A user's ConfigMap is not cached whole, but its metadata is, trimmed.
	if _, err := c.ConfigMapLister().ConfigMaps("a").Get("user-settings"); !apierrors.IsNotFound(err) {
		t.Errorf("an unlabelled ConfigMap is cached whole: err %v", err)
	}
	m, err := c.MetadataLister(ConfigMapsResource).Get("a", "user-settings")
	if err != nil {
		t.Fatalf("user ConfigMap's metadata: %v", err)
	}
	if len(m.Annotations) != 0 || len(m.ManagedFields) != 0 || m.Name != "user-settings" {
		t.Errorf("metadata not trimmed: %+v", m.ObjectMeta)
	}
	if _, err := c.MetadataLister(DeploymentsResource).Get("a", "foreign"); err != nil {
		t.Errorf("the foreign Deployment's metadata: %v", err)
	}
}

func TestChosenNamespaces(t *testing.T) {
	c := startCaches(t, Options{
		Namespaces:        []string{"a"},
		ChildSelector:     "app.kubernetes.io/managed-by=handroll",
		OperatorNamespace: "ops",
	})
	apps, _ := c.WebAppLister().List(labels.Everything())
	if len(apps) != 1 || apps[0].Namespace != "a" {
		t.Fatalf("WebApps %v; want only a/web", apps)
	}
	if _, err := c.WebAppLister().WebApps("b").Get("web"); !apierrors.IsNotFound(err) {
		t.Errorf("b/web is visible outside --namespaces: err %v", err)
	}
	if got := len(c.WebApps()); got != 1 {
		t.Errorf("%d WebApp informers for one namespace", got)
	}
	// The operator's namespace is cached for its own labelled ConfigMaps only.
	if _, err := c.ConfigMapLister().ConfigMaps("ops").Get("webapp-directory"); err != nil {
		t.Errorf("the directory in the operator's namespace: %v", err)
	}
	if _, err := c.ConfigMapLister().ConfigMaps("ops").Get("unrelated"); !apierrors.IsNotFound(err) {
		t.Errorf("an unlabelled ConfigMap of the operator's namespace is cached: err %v", err)
	}
}

func TestTransformStripsManagedFields(t *testing.T) {
	c := startCaches(t, Options{})
	d, err := c.DeploymentLister().Deployments("a").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ManagedFields) != 0 {
		t.Errorf("managedFields kept in the cache: %v", d.ManagedFields)
	}
	if _, ok := d.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("the last-applied annotation kept in the cache")
	}
	if d.Annotations["keep"] != "me" {
		t.Errorf("other annotations lost: %v", d.Annotations)
	}
}

func TestTrimMetadataKeepsWhatIsRead(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "a", Name: "web", ResourceVersion: "7", UID: "self",
		Labels: map[string]string{"x": "y"}, Annotations: map[string]string{"big": "value"},
		OwnerReferences: []metav1.OwnerReference{
			{UID: "other", Name: "not-the-controller"},
			{UID: "owner", Name: "web", Controller: ptr.To(true)},
		},
	}}
	out, err := TrimMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &Ref{Namespace: "a", Name: "web", ResourceVersion: "7", ControllerUID: "owner"}
	if r, ok := out.(*Ref); !ok || *r != *want {
		t.Fatalf("TrimMetadata = %#v; want %#v", out, want)
	}
	// Informers key and handlers read it through meta.Accessor.
	m, err := meta_.Accessor(out)
	if err != nil {
		t.Fatal(err)
	}
	if c := metav1.GetControllerOf(m); m.GetName() != "web" || m.GetResourceVersion() != "7" || c == nil || c.UID != "owner" {
		t.Errorf("read back as %s/%s rv %s controller %v", m.GetNamespace(), m.GetName(), m.GetResourceVersion(), c)
	}
	if key, err := cache.MetaNamespaceKeyFunc(out); err != nil || key != "a/web" {
		t.Errorf("key %q, %v", key, err)
	}
}

// A WebApp's Ref keeps its own uid too (a range is chosen by it), read
// back through meta.Accessor; what is not a PartialObjectMetadata (a Ref
// already, a tombstone) passes unchanged.
func TestTrimWebAppMetadataKeepsItsUID(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", ResourceVersion: "7", UID: "self"}}
	out, err := trimWebAppMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := out.(*Ref); !ok || *r != (Ref{Namespace: "a", Name: "web", ResourceVersion: "7", UID: "self"}) {
		t.Fatalf("trimWebAppMetadata = %#v", out)
	}
	if m, err := meta_.Accessor(out); err != nil || m.GetUID() != "self" {
		t.Errorf("read back with uid %q, %v", m.GetUID(), err)
	}
	for _, obj := range []any{out, cache.DeletedFinalStateUnknown{Key: "a/web", Obj: out}} {
		if again, err := trimWebAppMetadata(obj); err != nil || again != obj {
			t.Errorf("trimWebAppMetadata(%T) = %#v, %v; want it unchanged", obj, again, err)
		}
	}
}
