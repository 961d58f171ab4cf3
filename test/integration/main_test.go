package integration

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// env is the package's control plane: etcd and kube-apiserver with the
// handroll CRDs installed.
var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }

// requestTimeout bounds each test's calls to the API server, so that a hung
// server fails the test instead of the whole run's -timeout.
const requestTimeout = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := budget.Context(t, t.Context(), requestTimeout, t.Name()+"'s calls to the API server")
	t.Cleanup(cancel)
	return ctx
}

func handrollClient(t *testing.T) versioned.Interface { return env.HandrollClient(t) }

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("building the dynamic client: %v", err)
	}
	return c
}

// asJSON renders v for failure messages; the API types print poorly with %v
// (pointers, quantities, times).
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
