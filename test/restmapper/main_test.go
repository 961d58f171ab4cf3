package restmapper

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	handrollmapper "github.com/handroll/handroll/pkg/restmapper"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// env is the package's control plane: etcd and kube-apiserver, with the
// handroll CRD installed.
var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }

// timeout bounds each test's waits on the API server, so that a hung server
// fails the test instead of the whole run's -timeout.
const timeout = 60 * time.Second

func testContext(t testing.TB) context.Context {
	t.Helper()
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	ctx, cancel := budget.Context(t, context.Background(), timeout, t.Name()+"'s calls to the API server")
	t.Cleanup(cancel)
	return ctx
}

// counter counts the requests made through a rest.Config it wrapped, and
// the bytes of their response bodies (as read, after decompression).
type counter struct {
	mu           sync.Mutex
	paths        []string
	contentTypes map[string]string // by path, of the last response
	bytes        int64
}

func newCounter() *counter { return &counter{contentTypes: map[string]string{}} }

// config returns a copy of the admin config whose requests c counts. Its
// client-side rate limit is off: what is measured is the mapper, not the
// throttle in front of it.
func (c *counter) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.paths = append(c.paths, req.URL.Path)
			if resp != nil {
				c.contentTypes[req.URL.Path] = resp.Header.Get("Content-Type")
				resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
			}
			return resp, err
		})
	})
	return cfg
}

// requests returns the paths requested so far, in order.
func (c *counter) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.paths)
}

func (c *counter) totals() (requests int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.paths), c.bytes
}

func (c *counter) contentType(path string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.contentTypes[path]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type countingBody struct {
	io.ReadCloser
	c *counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.bytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// newMapper returns a mapper over a discovery client of its own, and the
// counter of that client's requests.
func newMapper(t testing.TB, opts handrollmapper.Options) (*handrollmapper.Mapper, *counter) {
	t.Helper()
	c := newCounter()
	dc, err := discovery.NewDiscoveryClientForConfig(c.config())
	if err != nil {
		t.Fatalf("building a discovery client: %v", err)
	}
	m, err := handrollmapper.New(dc, opts)
	if err != nil {
		t.Fatalf("restmapper.New: %v", err)
	}
	return m, c
}

// crd is a throwaway CustomResourceDefinition in its own group, so that
// tests do not see each other's kinds. Its versions are served; the last
// one is stored.
func crd(group, kind, plural string, scope apiextensionsv1.ResourceScope, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: kind, ListKind: kind + "List", Plural: plural, Singular: singular(kind),
			},
			Scope: scope,
		},
	}
	preserve := true
	for i, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == len(versions)-1,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: &preserve,
			}},
		})
	}
	return c
}

func singular(kind string) string {
	b := []byte(kind)
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

func crdClient(t testing.TB) apiextensionsclient.Interface {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("building the apiextensions client: %v", err)
	}
	return c
}

// installCRD creates c, waits until it is Established, and deletes it when
// the test ends.
func installCRD(ctx context.Context, t testing.TB, c *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	client := crdClient(t)
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", c.Name, err)
	}
	t.Cleanup(func() { deleteCRD(context.Background(), t, c.Name) })
	err := budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not Established: %v", c.Name, err)
	}
}

// deleteCRD deletes CRD name and waits until it is gone.
func deleteCRD(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	client := crdClient(t)
	err := client.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting CRD %s: %v", name, err)
		return
	}
	err = budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("CRD %s not gone: %v", name, err)
	}
}

// eventually polls check until it returns nil, and fails t with its last
// error if it never does.
func eventually(ctx context.Context, t testing.TB, what string, check func() error) {
	t.Helper()
	var last error
	err := budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: never happened: %v", what, fmt.Errorf("%w (last: %v)", err, last))
	}
}
