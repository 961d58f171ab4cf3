package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"

	handrollfake "github.com/handroll/handroll/pkg/generated/clientset/versioned/fake"
)

// TestConversionCallFailed tells the API server failing to reach the
// WebApp conversion webhook, which a ready replica would serve, from every
// other list error, a webhook's own refusal included.
func TestConversionCallFailed(t *testing.T) {
	// As the reflector hands them to the watch error handler: the API
	// server's InternalError, wrapped.
	listErr := func(msg string) error {
		return fmt.Errorf("failed to list *v1.WebApp: %w", apierrors.NewInternalError(errors.New(msg)))
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no endpoint", listErr(`conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: Post "https://handroll-webhook.handroll-system.svc:443/convert?timeout=30s": no endpoints available for service "handroll-webhook"`), true},
		{"connection refused", listErr(`conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: Post "https://10.96.0.12:443/convert?timeout=30s": dial tcp 10.96.0.12:443: connect: connection refused`), true},
		{"the webhook refused", listErr(`conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: spec.size: Invalid value: -1`), false},
		{"another CRD's webhook", listErr(`conversion webhook for example.com/v1beta1, Kind=WebApp failed: Post "https://other.svc:443/convert": no endpoints available for service "other"`), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "handroll.dev", Resource: "webapps"}, "", errors.New("RBAC")), false},
		{"none", nil, false},
	} {
		if got := ConversionCallFailed(tc.err); got != tc.want {
			t.Errorf("%s: ConversionCallFailed(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// listOnlyMetadata is a metadata client whose lists fail as they do when
// the API server cannot call the conversion webhook, and which says
// whether anything asked it for a watch-list (a watch sending the initial
// events).
type listOnlyMetadata struct {
	metadata.ResourceInterface
	err       error
	watchList atomic.Bool
	lists     atomic.Int32
}

func (m *listOnlyMetadata) Resource(schema.GroupVersionResource) metadata.Getter { return m }
func (m *listOnlyMetadata) Namespace(string) metadata.ResourceInterface          { return m }

func (m *listOnlyMetadata) List(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	m.lists.Add(1)
	return nil, m.err
}

func (m *listOnlyMetadata) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		m.watchList.Store(true)
	}
	return nil, m.err
}

// TestWebAppMetadataAwaitsConversion: the WebApps' metadata informer lists
// rather than watch-lists, and its failed list, for want of the conversion
// webhook, is recorded, so that a replica serving that webhook does not
// wait for it (a sharded replica caches every WebApp's metadata).
func TestWebAppMetadataAwaitsConversion(t *testing.T) {
	meta := &listOnlyMetadata{err: apierrors.NewInternalError(errors.New(
		`conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: Post "https://handroll-webhook.handroll-system.svc:443/convert?timeout=30s": no endpoints available for service "handroll-webhook"`))}
	c := New(kubefake.NewClientset(), handrollfake.NewClientset(), meta, Options{})
	c.Metadata(WebAppsResource)
	stop := make(chan struct{})
	defer func() { close(stop); c.Shutdown() }()
	c.Start(stop)

	want := []string{"handroll.dev/v1 webapps (metadata) in all namespaces"}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(c.AwaitingConversion(), want), nil
	}); err != nil {
		t.Fatalf("AwaitingConversion() = %q, want %q (lists: %d)", c.AwaitingConversion(), want, meta.lists.Load())
	}
	if got := c.UnsyncedExceptConversion(); len(got) > 0 {
		t.Errorf("UnsyncedExceptConversion() = %q, want none", got)
	}
	if meta.watchList.Load() {
		t.Error("the WebApps' metadata informer asked for a watch-list")
	}
}
