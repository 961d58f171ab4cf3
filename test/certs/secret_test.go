package certs

import (
	"context"
	"crypto/x509"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/test/budget"
)

// TestReplicasShareOneSecret starts two replicas at once on an empty
// namespace. Each sends a create, held until the other has sent its own so
// that they really race; the API server takes one, and the other replica
// must adopt it rather than overwrite it. Both then serve the same
// certificate, which verifies against the Secret's ca.crt for the Service.
func TestReplicasShareOneSecret(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	secrets := env.KubeClient(t).CoreV1().Secrets(ns)
	w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + certs.DefaultSecretName})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	hold := holdSecretCreates()
	opts := certs.Options{
		Namespace: ns, ServiceName: "handroll-webhook",
		WebhookConfigurations: []string{}, CRDs: []string{},
		ResyncPeriod: 200 * time.Millisecond, // many decisions in the window below
	}
	var (
		reqs     [2]*requests
		replicas [2]*certs.Manager
	)
	for i := range replicas {
		reqs[i] = &requests{hold: hold}
		replicas[i] = startManager(t, reqs[i].config(env.Config), opts)
	}

	eventually(t, time.Minute, "both replicas serve a certificate", func(context.Context) (bool, error) {
		for _, m := range replicas {
			if err := m.Ready(); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	for i := range replicas {
		if n := reqs[i].Count(http.MethodPost, "/secrets"); n != 1 {
			t.Errorf("replica %d sent %d creates, want 1 (the race was not run)", i, n)
		}
	}
	// The loser reads the winner's Secret after its AlreadyExists.
	eventually(t, time.Minute, "the losing replica reads the Secret", func(context.Context) (bool, error) {
		return reqs[0].Count(http.MethodGet, "/secrets/"+certs.DefaultSecretName)+
			reqs[1].Count(http.MethodGet, "/secrets/"+certs.DefaultSecretName) > 0, nil
	})
	// Neither writes again while each decides every 200 ms.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for i := range replicas {
			if n := reqs[i].Count(http.MethodPut, "/secrets/"+certs.DefaultSecretName); n > 0 {
				t.Fatalf("replica %d updated the Secret %d times; the first replica's was current", i, n)
			}
		}
	}

	a, _ := replicas[0].GetCertificate(nil)
	b, _ := replicas[1].GetCertificate(nil)
	if !a.Leaf.Equal(b.Leaf) {
		t.Fatalf("the replicas serve different certificates: serials %x and %x", a.Leaf.SerialNumber, b.Leaf.SerialNumber)
	}

	secret, err := secrets.Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSharedSecret(t, secret, a.Leaf, ns)

	// The watch saw one creation and nothing else.
	checkOneCreation(t, w, secret)
}

// holdSecretCreates returns a hold for requests that keeps each Secret
// create until the second has arrived, so that the two replicas' creates
// really race.
func holdSecretCreates() func(*http.Request) {
	var arrived atomic.Int32
	both := make(chan struct{})
	return func(req *http.Request) {
		if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/secrets") {
			return
		}
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(budget.Scale(30 * time.Second)): // the other never created: the assertions below say so
		}
	}
}

// checkSharedSecret checks the Secret's type, keys and annotation, and
// that leaf verifies against its ca.crt for each of the Service's names.
func checkSharedSecret(t *testing.T, secret *corev1.Secret, leaf *x509.Certificate, ns string) {
	t.Helper()
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q, want %q", secret.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{certs.KeyServingCert, certs.KeyServingKey, certs.KeyCABundle, certs.KeyCAKey} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("Secret has no %s", k)
		}
	}
	if secret.Annotations[certs.AnnotationCAPublishedAt] == "" {
		t.Errorf("Secret has no %s annotation", certs.AnnotationCAPublishedAt)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data[certs.KeyCABundle]) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, name := range []string{"handroll-webhook", "handroll-webhook." + ns + ".svc", "handroll-webhook." + ns + ".svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("the served certificate for %s: %v", name, err)
		}
	}
}

// checkOneCreation checks that w saw secret created and nothing else.
func checkOneCreation(t *testing.T, w watch.Interface, secret *corev1.Secret) {
	t.Helper()
	var events []watch.EventType
	var addedRV string
collect:
	for {
		select {
		case ev := <-w.ResultChan():
			events = append(events, ev.Type)
			if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type == watch.Added {
				addedRV = s.ResourceVersion
			}
		default:
			break collect
		}
	}
	if len(events) != 1 || events[0] != watch.Added || addedRV != secret.ResourceVersion {
		t.Errorf("watch events %v (created at resourceVersion %s, now %s), want one ADDED and no change since",
			events, addedRV, secret.ResourceVersion)
	}
}
