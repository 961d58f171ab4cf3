package webapp

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// Short Lease timings that pass Validate: the leader gives up at most
// retry period + renew deadline + request timeout (0.5 + 2 + 1 s) after the
// API server accepted its last renewal; a standby takes over no sooner than
// the lease duration (4 s) after it.
var shortLease = []string{
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=2s",
	"--leader-elect-retry-period=500ms",
}

const shortLeaseDuration = 4 * time.Second

// holdingWebhook is a validating admission webhook, served by the test,
// that holds every write of a Deployment in one namespace until released
// or until the API server gives up on it (30 s): a reconcile kept in flight
// at will.
type holdingWebhook struct {
	held      chan struct{} // closed when a write is first held
	release   chan struct{}
	heldOnce  sync.Once
	probeSeen chan struct{} // closed when the probe Deployment is seen
	probeOnce sync.Once
}

const holdProbe = "hold-probe"

func holdDeploymentWrites(t *testing.T, ns string) *holdingWebhook {
	t.Helper()
	h := &holdingWebhook{held: make(chan struct{}), release: make(chan struct{}), probeSeen: make(chan struct{})}
	tlsConfig, err := server.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	srv.TLS = tlsConfig
	srv.StartTLS()
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsConfig.Certificates[0].Certificate[0]})

	name := "hold-deployments-" + ns
	ctx := context.Background()
	_, err = kubeClient(t).AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "hold.test.handroll.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/hold"), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
					Resources: []string{"deployments"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(30)),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Release()
		_ = kubeClient(t).AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		srv.Close()
	})

	// The API server has picked the configuration up once a dry-run
	// create of the probe Deployment reaches the webhook.
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: holdProbe, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": holdProbe}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": holdProbe}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
	eventually(t, "the holding webhook is called", func(ctx context.Context) (bool, error) {
		_, _ = kubeClient(t).AppsV1().Deployments(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		select {
		case <-h.probeSeen:
			return true, nil
		default:
			return false, nil
		}
	})
	return h
}

func (h *holdingWebhook) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if review.Request.Name == holdProbe {
		h.probeOnce.Do(func() { close(h.probeSeen) })
	} else {
		h.heldOnce.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(&review)
}

// Release lets every held write, and every later one, through.
func (h *holdingWebhook) Release() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holdingWebhook) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(budget.Scale(30 * time.Second)):
		t.Fatal("no Deployment write reached the holding webhook")
	}
}

// lastRenewal polls the Lease, straight from the API server, and returns a
// function giving the last renewTime it saw.
func lastRenewal(t *testing.T, ns string) func() time.Time {
	var (
		mu   sync.Mutex
		last time.Time
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			l, err := kubeClient(t).CoordinationV1().Leases(ns).Get(ctx, "handroll-leader", metav1.GetOptions{})
			if err == nil && l.Spec.RenewTime != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				mu.Lock()
				if r := l.Spec.RenewTime.Time; r.After(last) {
					last = r
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// Defect: a leader that lost its Lease while its in-flight reconciles
// drained after SIGTERM went on stopping gracefully (flushing events,
// waiting for its servers) and could outlive its lease. Here the leader,
// reaching the API server through a proxy, is draining a reconcile held by
// a webhook when its link is cut; a kubelet keeps probing it. It must exit
// non-zero, saying it lost the lease, before a standby could take it over.
func TestLeaderLosingTheAPIServerWhileDrainingExits(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	hook := holdDeploymentWrites(t, ns)
	proxy := operator.NewProxy(t, strings.TrimPrefix(env.Server, "https://"))
	kubeconfig := env.WriteKubeconfig(t, func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server = "https://" + proxy.Addr()
		}
	})
	op := operator.Start(t, kubeconfig, append([]string{
		"--operator-namespace=" + opNS, "--namespaces=" + ns,
		"--leader-elect-resource-namespace=" + opNS,
		"--graceful-shutdown-timeout=60s",
	}, shortLease...)...)
	leaderOf(t, []*operator.Operator{op})
	renewed := lastRenewal(t, opNS)

	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	hook.waitHeld(t)
	if err := syscall.Kill(op.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader drains its reconcile", func(context.Context) (bool, error) {
		return strings.Contains(op.Log(), "waiting for the leader's work to end"), nil
	})

	// The kubelet probes on, as it does while a pod terminates.
	probing, stopProbing := context.WithCancel(context.Background())
	defer stopProbing()
	go func() {
		for probing.Err() == nil {
			op.Probe(t, "/readyz/api-server")
			time.Sleep(200 * time.Millisecond)
		}
	}()
	cut := time.Now()
	proxy.Cut(operator.LinkBlackhole)

	select {
	case <-op.Exited():
	case <-time.After(budget.Scale(30 * time.Second)):
		t.Fatalf("the leader did not exit within %s of losing its API server while draining:\n%s", budget.Scale(30*time.Second), op.Log())
	}
	stopProbing()
	exited, _ := op.ExitedAt()
	if err := op.Stop(t, syscall.SIGTERM, time.Second); err == nil {
		t.Error("the leader exited with code 0 after losing its lease")
	}
	if !strings.Contains(op.Log(), "Lost the leader lease") {
		t.Error("the leader exited without saying it lost its lease")
	}
	last := renewed()
	if last.IsZero() {
		t.Fatal("no renewal of the Lease was seen")
	}
	if expires := last.Add(shortLeaseDuration); !exited.Before(expires) {
		t.Errorf("the leader exited at %s, %s after its lease could be taken (last renewal %s)",
			exited.Format(time.StampMilli), exited.Sub(expires).Round(time.Millisecond), last.Format(time.StampMilli))
	}
	t.Logf("cut %s after the last renewal; exited %s after the cut, %s before the lease could be taken",
		cut.Sub(last).Round(time.Millisecond), exited.Sub(cut).Round(time.Millisecond), last.Add(shortLeaseDuration).Sub(exited).Round(time.Millisecond))
}

// Risk: the controllers' drain timeout was the process's shutdown timeout,
// so when a reconcile hung at the stop the process exited at its deadline
// without releasing the Lease, and a standby waited out a lease duration.
// The drain now ends a margin earlier: the Lease is released in time.
func TestHungReconcileStillReleasesTheLease(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	hook := holdDeploymentWrites(t, ns)
	op := operator.Start(t, env.Kubeconfig, append([]string{
		"--operator-namespace=" + opNS, "--namespaces=" + ns,
		"--leader-elect-resource-namespace=" + opNS,
		"--graceful-shutdown-timeout=8s",
	}, shortLease...)...)
	leaderOf(t, []*operator.Operator{op})
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "hung", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	hook.waitHeld(t)

	began := time.Now()
	_ = op.Stop(t, syscall.SIGTERM, 20*time.Second) // non-zero: the drain gave up
	t.Logf("exited %s after SIGTERM", time.Since(began).Round(time.Millisecond))
	lease, err := kubeClient(t).CoordinationV1().Leases(opNS).Get(context.Background(), "handroll-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease still names %q after a stop whose drain gave up within the shutdown timeout", *h)
	}
	if !strings.Contains(op.Log(), "Released the lease") {
		t.Error("the log does not say the Lease was released")
	}
}
