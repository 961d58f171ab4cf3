package pitfalls

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollscheme "github.com/handroll/handroll/pkg/apis/scheme"
)

// TestNilSchemeKnowsOnlyClientGoKinds: with Options.Scheme nil the Manager
// uses client-go's global scheme. A ConfigMap Get reaches the API server
// (NotFound); a WebApp Get fails in the client, before any request, with
// runtime's "no kind is registered" error, though the CRD is installed.
// With handroll's scheme the same Get reaches the API server (NotFound).
func TestNilSchemeKnowsOnlyClientGoKinds(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: "absent"}

	mgr := newManager(t, cfg, manager.Options{})
	if mgr.GetScheme() != clientgoscheme.Scheme {
		t.Fatal("with Options.Scheme nil, mgr.GetScheme() is not client-go's scheme.Scheme")
	}
	if err := mgr.GetAPIReader().Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap Get with the nil scheme: %v; want NotFound from the API server", err)
	}
	err := mgr.GetAPIReader().Get(ctx, key, &handrollv1.WebApp{})
	want := "no kind is registered for the type v1.WebApp in scheme"
	if !runtime.IsNotRegisteredError(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("WebApp Get with the nil scheme: %v; want runtime's not-registered error saying %q", err, want)
	}
	t.Logf("WebApp Get with the nil scheme: %v", err)

	s, err := handrollscheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr = newManager(t, cfg, manager.Options{Scheme: s})
	if err := mgr.GetAPIReader().Get(ctx, key, &handrollv1.WebApp{}); !apierrors.IsNotFound(err) {
		t.Fatalf("WebApp Get with handroll's scheme: %v; want NotFound from the API server", err)
	}
}

// TestLeaderElectionNeedsIDAndNamespace: ctrl.NewManager refuses leader
// election without an ID, and, outside a cluster, without a namespace.
func TestLeaderElectionNeedsIDAndNamespace(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	for _, c := range []struct {
		name string
		opts manager.Options
		want string
	}{
		{"no ID", manager.Options{LeaderElection: true, LeaderElectionNamespace: "default"},
			"LeaderElectionID must be configured"},
		{"no namespace", manager.Options{LeaderElection: true, LeaderElectionID: "pitfalls"},
			"unable to find leader election namespace: not running in-cluster, please specify LeaderElectionNamespace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.opts.LeaderElectionNamespace == "" {
				if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
					t.Skip("a service-account namespace file exists: the namespace would default to it")
				}
			}
			c.opts.Metrics = metricsserver.Options{BindAddress: "0"}
			c.opts.HealthProbeBindAddress = "0"
			mgr, err := ctrl.NewManager(rest.CopyConfig(cfg), c.opts)
			if err == nil || err.Error() != c.want {
				t.Fatalf("ctrl.NewManager returned %v; want the error %q", err, c.want)
			}
			if mgr != nil {
				t.Error("ctrl.NewManager returned a Manager with its error")
			}
		})
	}
}

// TestForbiddenLeaseNamespaceLeavesAStandby: a user that may not touch
// Leases in LeaderElectionNamespace passes ctrl.NewManager and mgr.Start
// does not fail: the Manager stays a standby, running only what needs no
// leader, and creates no Lease. Once a Role allows it, it leads.
func TestForbiddenLeaseNamespaceLeavesAStandby(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	ns := env.Namespace(t)
	const user = "pitfalls-no-lease-rights"
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	mgr := newManager(t, cfg, manager.Options{
		LeaderElection:          true,
		LeaderElectionID:        "pitfalls",
		LeaderElectionNamespace: ns,
		LeaseDuration:           ptr.To(4 * time.Second),
		RenewDeadline:           ptr.To(2 * time.Second),
		RetryPeriod:             ptr.To(500 * time.Millisecond),
	})
	plain, everywhere := make(chan struct{}), make(chan struct{})
	runs := func(started chan struct{}) manager.RunnableFunc {
		return func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		}
	}
	if err := mgr.Add(runs(plain)); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(everyReplica{runs(everywhere)}); err != nil {
		t.Fatal(err)
	}
	run := start(t, mgr)

	within(t, waitLimit, everywhere, "the runnable with NeedLeaderElection false starts")
	select {
	case <-plain:
		t.Fatal("the plain runnable started though the user may not touch Leases")
	case <-mgr.Elected():
		t.Fatal("the manager says it leads though the user may not touch Leases")
	case <-run.done:
		t.Fatalf("mgr.Start returned: %v", run.err)
	case <-time.After(3 * time.Second):
	}
	kube := env.KubeClient(t)
	ctx := context.Background()
	if _, err := kube.CoordinationV1().Leases(ns).Get(ctx, "pitfalls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Lease after 3 s as a standby: %v; want NotFound", err)
	}

	// The elector kept retrying: a grant made now lets it lead.
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "leases"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			// Only so that the "became leader" event is not logged as refused.
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "leases"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leases"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	within(t, waitLimit, mgr.Elected(), "the manager leads once a Role allows Leases")
	within(t, waitLimit, plain, "the plain runnable starts on leading")
}
