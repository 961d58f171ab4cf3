package cache

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
