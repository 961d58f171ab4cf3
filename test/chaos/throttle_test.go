package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/operator"
)

// TestThrottledConverges: with --kube-api-qps=5 (a quarter of the default),
// 200 WebApps still converge, and the wait on the client-side limiter never
// reaches users as an error: no WebApp reports Degraded, no Warning event is
// recorded, and the operator counts no failed reconcile.
func TestThrottledConverges(t *testing.T) {
	const n = 200
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	hc := env.HandrollClient(t)
	ctx := context.Background()
	op := operator.Start(t, env.Kubeconfig, "--operator-namespace="+opNS, "--leader-elect=false",
		"--kube-api-qps=5", "--kube-api-burst=5")
	for i := range n {
		w := &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%03d", i), Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		}
		if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var degraded []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
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
	if err != nil {
		t.Fatalf("200 WebApps at 5 QPS did not converge: %v", err)
	}
	t.Logf("200 WebApps converged at --kube-api-qps=5 in %s", time.Since(start).Round(time.Second))
	if len(degraded) > 0 {
		t.Errorf("%d WebApps reported Degraded on the way, first: %s", len(degraded), degraded[0])
	}
	events, err := env.KubeClient(t).EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("a Warning event reached users: %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}
	if f, ok := op.Metrics(t)["controller_runtime_reconcile_errors_total"]; ok {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%v reconciles failed under throttling", v)
			}
		}
	}
}
