package gitops

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// env is the package's control plane: etcd and kube-apiserver with the
// handroll CRD installed. No operator runs: the tests write the statuses.
var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }

var (
	webAppsV1       = schema.GroupVersionResource{Group: handrollv1.GroupName, Version: "v1", Resource: "webapps"}
	webAppsV1alpha1 = schema.GroupVersionResource{Group: handrollv1.GroupName, Version: "v1alpha1", Resource: "webapps"}
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := budget.Context(t, t.Context(), 30*time.Second, t.Name()+"'s calls to the API server")
	t.Cleanup(cancel)
	return ctx
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("building the dynamic client: %v", err)
	}
	return c
}

func newWebApp(name string) *handrollv1.WebApp {
	return &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}
}

// writeStatus does what the reconciler's status write does: ComputeStatus
// on the WebApp as the API server has it (defaulted as the reconciler
// defaults it) and what a reconcile observed, applied through the status
// subresource by field manager handroll. It returns the status written.
func writeStatus(ctx context.Context, t *testing.T, ns, name string, obs webapp.Observed) handrollv1.WebAppStatus {
	t.Helper()
	webapps := env.HandrollClient(t).HandrollV1().WebApps(ns)
	w, err := webapps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handrollv1.SetObjectDefaults_WebApp(w)
	st := webapp.ComputeStatus(w, obs, metav1.Now())
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var ac handrollac.WebAppStatusApplyConfiguration
	if err := json.Unmarshal(data, &ac); err != nil {
		t.Fatal(err)
	}
	_, err = webapps.ApplyStatus(ctx, handrollac.WebApp(name, ns).WithStatus(&ac),
		metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true})
	if err != nil {
		t.Fatalf("applying the status of %s/%s: %v", ns, name, err)
	}
	return st
}

// readAsTools reads the WebApp as Flux, kpt and Argo CD do: unstructured,
// from the API server.
func readAsTools(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dynamicClient(t).Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvr.Version, ns, name, err)
	}
	return u
}

// kstatus is cli-utils' reading of u.
func kstatus(t *testing.T, u *unstructured.Unstructured) *status.Result {
	t.Helper()
	res, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus cannot read %s: %v", u.GetName(), err)
	}
	return res
}

// asJSON renders v for failure messages.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
