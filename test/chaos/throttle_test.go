package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestThrottledConverges: with --kube-api-qps=5 (a quarter of the default),
// 200 WebApps still converge, and the wait on the client-side limiter never
// reaches users as an error: no WebApp reports Degraded, handroll records no
// Warning event, and it counts no failed reconcile.
func TestThrottledConverges(t *testing.T) {
	const n = 200
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	op := operator.Start(t, env.Kubeconfig, "--operator-namespace="+opNS, "--leader-elect=false", "--namespaces="+ns,
		"--kube-api-qps=5", "--kube-api-burst=5")
	createWebApps(t, ns, "t", n)
	took := convergeWithoutErrors(t, op, ns, n, 15*time.Minute)
	t.Logf("%d WebApps converged at --kube-api-qps=5 in %s", n, took.Round(time.Second))
}

// TestPriorityAndFairnessRejectionsAreRetried squeezes the operator into an
// API Priority and Fairness priority level of about three seats that rejects
// (429, Retry-After) what it cannot seat, then lets sixteen workers converge
// 100 WebApps through it. client-go must retry the 429s after the server's
// Retry-After, so that none reaches a reconcile as an error, a status or an
// event.
func TestPriorityAndFairnessRejectionsAreRetried(t *testing.T) {
	const n = 100
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kube := env.KubeClient(t)

	// The admin user is system:masters, which APF exempts; the operator
	// runs as a ServiceAccount instead, bound to cluster-admin.
	kubeconfig := serviceAccountKubeconfig(t, opNS, "squeezed")
	level := "handroll-squeezed-" + opNS
	if _, err := kube.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				// One share of the server's ~600 seats among ~250 shares:
				// ceil(2.4) = 3 seats, none lent or borrowed.
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.FlowcontrolV1().PriorityLevelConfigurations().Delete(context.Background(), level, metav1.DeleteOptions{})
	})
	if _, err := kube.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         500, // before the suggested schemas (1000 and up)
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{
					Kind:           flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: opNS, Name: "squeezed"},
				}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.FlowcontrolV1().FlowSchemas().Delete(context.Background(), level, metav1.DeleteOptions{})
	})

	createWebApps(t, ns, "p", n)
	op := operator.Start(t, kubeconfig, "--operator-namespace="+opNS, "--leader-elect=false", "--namespaces="+ns,
		"--kube-api-qps=500", "--kube-api-burst=500", "--max-concurrent-reconciles=16")
	took := convergeWithoutErrors(t, op, ns, n, 10*time.Minute)

	retried := 0.0
	if f, ok := op.Metrics(t)["rest_client_request_retries_total"]; ok {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == "429" {
					retried += m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Logf("%d WebApps converged through a three-seat priority level in %s; client-go retried %v requests answered 429",
		n, took.Round(time.Second), retried)
	if retried == 0 {
		t.Fatal("the priority level never rejected a request: the test did not squeeze the operator")
	}
}

func createWebApps(t *testing.T, ns, prefix string, n int) {
	t.Helper()
	hc := env.HandrollClient(t)
	for i := range n {
		w := &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%03d", prefix, i), Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		}
		if _, err := hc.HandrollV1().WebApps(ns).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// convergeWithoutErrors waits until every one of the n WebApps in ns has
// been observed at its generation, and fails t if, on the way, any reported
// Degraded, handroll recorded a Warning event in ns, or a reconcile failed.
func convergeWithoutErrors(t *testing.T, op *operator.Operator, ns string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	timeout = budget.Scale(timeout)
	hc := env.HandrollClient(t)
	ctx := context.Background()
	start := time.Now()
	var degraded []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := hc.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, w := range l.Items {
			for _, c := range w.Status.Conditions {
				if c.Type == "Degraded" && c.Status == metav1.ConditionTrue {
					degraded = append(degraded, w.Name+": "+c.Message)
				}
			}
			if w.Status.ObservedGeneration == w.Generation {
				done++
			}
		}
		return done == n, nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%d WebApps did not converge: %v", n, err)
	}
	if len(degraded) > 0 {
		t.Errorf("%d WebApps reported Degraded on the way, first: %s", len(degraded), degraded[0])
	}
	events, err := env.KubeClient(t).EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, e := range events.Items {
		// The API server records Warnings of its own in the namespace (its
		// ClusterIP repair loop, for one); only handroll's concern us.
		if e.ReportingController != "handroll" {
			continue
		}
		ours++
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("a Warning event reached users: %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}
	if ours == 0 {
		t.Errorf("handroll recorded no event in %s at all; is the filter on reportingController still right?", ns)
	}
	if f, ok := op.Metrics(t)["controller_runtime_reconcile_errors_total"]; ok {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%v reconciles failed", v)
			}
		}
	}
	return took
}

// serviceAccountKubeconfig creates the ServiceAccount ns/name, binds it to
// cluster-admin, and writes a kubeconfig holding a token of it.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	kube := env.KubeClient(t)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := ns + "-" + name
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	})
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env.WriteKubeconfig(t, controlplane.WithToken(tr.Status.Token))
}
