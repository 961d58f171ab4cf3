package shard

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestWebhookReplicaFrozenBehindAService measures, on the real API server,
// what a frozen webhook replica costs: two handroll processes serve the
// manifests' webhooks behind one address that gives each new connection
// to the next replica, as a Service does; WebApp creates (dry run, so
// admitted and not stored) arrive at a steady rate; the replica holding
// the API server's connections is frozen with SIGSTOP, and the creates
// refused after are counted. A measurement, not a check: it runs only with
// HANDROLL_MEASURE_FROZEN_REPLICA=1 (HANDROLL_MEASURE_FROZEN_RATE creates a
// second, 10 unless set; HANDROLL_OPERATOR_BINARY another build).
func TestWebhookReplicaFrozenBehindAService(t *testing.T) {
	if os.Getenv("HANDROLL_MEASURE_FROZEN_REPLICA") == "" {
		t.Skip("a measurement of a minute: set HANDROLL_MEASURE_FROZEN_REPLICA=1")
	}
	if env == nil {
		t.Skip("needs the control plane")
	}
	rate := 10
	if r, err := strconv.Atoi(os.Getenv("HANDROLL_MEASURE_FROZEN_RATE")); err == nil && r > 0 {
		rate = r
	}
	const observed = 60 * time.Second
	ctx := context.Background()
	kube := env.KubeClient(t)
	opNS, ns := env.Namespace(t), env.Namespace(t)
	certDir := t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(certDir)
	if err != nil {
		t.Fatal(err)
	}
	svc := newRoundRobin(t)
	replicas := startReplicasBehind(t, svc, env.Kubeconfig, certDir, opNS)
	registerWebhooksAt(ctx, t, kube, "https://"+svc.addr(), ns, caBundle)

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = float32(4*rate), 8*rate
	apps := versioned.NewForConfigOrDie(cfg)
	create := func(i int) error {
		app := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns}, Spec: handrollv1.WebAppSpec{Image: "nginx:1.27"}}
		_, err := apps.HandrollV1().WebApps(ns).Create(ctx, app, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// Until the webhooks answer through the address: the API server reads
	// new configurations from its informer.
	waitUntil(t, time.Minute, "a create admitted by the webhooks", func() (bool, string) {
		if err := create(0); err != nil {
			return false, err.Error()
		}
		conns, _ := svc.counts()
		return len(conns) > 0, "no webhook call through the address yet"
	}, func() string { return "" })

	var mu sync.Mutex
	var results []frozenCreate
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	var frozenAt time.Time
	for i := 1; ; i++ {
		now := <-tick.C
		if now.Sub(start) > 3*time.Second+observed {
			break
		}
		if frozenAt.IsZero() && now.Sub(start) > 3*time.Second {
			freezeMostConnected(t, svc, replicas)
			frozenAt = time.Now()
		}
		wg.Go(func() {
			err := create(i)
			mu.Lock()
			results = append(results, frozenCreate{sent: now, err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	logFrozenCreates(t, results, frozenAt, svc, rate, observed)
}

// startReplicasBehind starts two handroll processes serving the webhooks
// from certDir, each given to svc, and returns them by address.
func startReplicasBehind(t *testing.T, svc *roundRobin, kubeconfig, certDir, opNS string) map[string]*operator.Operator {
	t.Helper()
	replicas := map[string]*operator.Operator{}
	for range 2 {
		port := operator.FreePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		o := operator.Launch(t, kubeconfig, fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+certDir,
			"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS)
		t.Cleanup(func() { _ = syscall.Kill(o.PID(), syscall.SIGCONT) }) // before its stop
		o.WaitReady(t, time.Minute)
		replicas[addr] = o
		svc.add(addr)
	}
	return replicas
}

// registerWebhooksAt registers the manifests' webhooks, for namespace ns
// only, at url instead of their Service, until the test ends.
func registerWebhooksAt(ctx context.Context, t *testing.T, kube kubernetes.Interface, url, ns string, caBundle []byte) {
	t.Helper()
	mutating, validating := operator.ManifestWebhookConfigurations(t)
	suffix := "-frozen-" + ns
	mutating.Name += suffix
	validating.Name += suffix
	only := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	mw, vw := &mutating.Webhooks[0], &validating.Webhooks[0]
	mwURL, vwURL := url+*mw.ClientConfig.Service.Path, url+*vw.ClientConfig.Service.Path
	mw.ClientConfig.Service, mw.ClientConfig.URL, mw.ClientConfig.CABundle, mw.NamespaceSelector = nil, &mwURL, caBundle, only
	vw.ClientConfig.Service, vw.ClientConfig.URL, vw.ClientConfig.CABundle, vw.NamespaceSelector = nil, &vwURL, caBundle, only
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mutating.Name, metav1.DeleteOptions{})
	})
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), validating.Name, metav1.DeleteOptions{})
	})
}

// freezeMostConnected freezes the replica the API server is connected to:
// the one that was given the most connections.
func freezeMostConnected(t *testing.T, svc *roundRobin, replicas map[string]*operator.Operator) {
	t.Helper()
	var frozen string
	conns, _ := svc.counts()
	for addr, n := range conns {
		if frozen == "" || n > conns[frozen] {
			frozen = addr
		}
	}
	if err := syscall.Kill(replicas[frozen].PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("froze %s; connections so far: %v", frozen, conns)
}

// frozenCreate is one create: when it was sent, and how it ended.
type frozenCreate struct {
	sent time.Time
	err  error
}

// logFrozenCreates logs how the creates sent after the freeze fared.
func logFrozenCreates(t *testing.T, results []frozenCreate, frozenAt time.Time, svc *roundRobin, rate int, observed time.Duration) {
	t.Helper()
	var refused, admitted int
	var lastRefused time.Duration = -1
	var firstErr error
	for _, r := range results {
		if r.sent.Before(frozenAt) {
			continue
		}
		if r.err == nil {
			admitted++
			continue
		}
		refused++
		lastRefused = max(lastRefused, r.sent.Sub(frozenAt))
		if firstErr == nil {
			firstErr = r.err
		}
	}
	conns, _ := svc.counts()
	t.Logf("%d creates at %d/s in %s after freezing the connected replica: %d refused (the last sent %s after the freeze), %d admitted; connections per replica: %v; first refusal: %v",
		refused+admitted, rate, observed, refused, lastRefused.Round(100*time.Millisecond), admitted, conns, firstErr)
}

// roundRobin is a Service's address: each new connection goes to the next
// replica, and lives until either side closes it.
type roundRobin struct {
	ln        net.Listener
	mu        sync.Mutex
	endpoints []string
	next      int
	accepted  map[string]int
}

func newRoundRobin(t *testing.T) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &roundRobin{ln: ln, accepted: map[string]int{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.forward(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return s
}

func (s *roundRobin) addr() string { return s.ln.Addr().String() }

func (s *roundRobin) add(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = append(s.endpoints, endpoint)
}

func (s *roundRobin) counts() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	total := 0
	for k, v := range s.accepted {
		out[k] = v
		total += v
	}
	return out, total
}

func (s *roundRobin) forward(client net.Conn) {
	defer client.Close()
	s.mu.Lock()
	endpoint := s.endpoints[s.next%len(s.endpoints)]
	s.next++
	s.accepted[endpoint]++
	s.mu.Unlock()
	backend, err := net.Dial("tcp", endpoint)
	if err != nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, backend); done <- struct{}{} }()
	<-done
}
