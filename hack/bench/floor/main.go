// Command floor is the benchmark's lower bound: a program that issues only
// the writes a WebApp's convergence needs, with the operators' QPS, burst
// and concurrency, and nothing else. It lists the WebApps once, then, with
// --max-concurrent-reconciles workers, applies each one's children (built by
// the reconciler's own desired-state functions) and its status. No
// informers, no finalizer, no directory, no events, no retries: an error
// ends the program with a failure, which the benchmark reports.
//
// It serves rest_client_requests_total on --metrics-bind-address, as the
// operators do, and stays up after its work until SIGINT or SIGTERM, so
// that the benchmark can read its metrics and /proc figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig  = pflag.String("kubeconfig", "", "Path to a kubeconfig.")
		qps         = pflag.Float32("kube-api-qps", 20, "Queries per second to the API server, sustained.")
		burst       = pflag.Int("kube-api-burst", 30, "Queries to the API server allowed in a burst above --kube-api-qps.")
		workers     = pflag.Int("max-concurrent-reconciles", 4, "WebApps written in parallel.")
		metricsAddr = pflag.String("metrics-bind-address", "127.0.0.1:0", "Address of /metrics.")
		healthAddr  = pflag.String("health-probe-bind-address", "127.0.0.1:0", "Address of /readyz.")
		waitSignal  = pflag.Bool("wait-for-sigusr1", false, "Once ready, wait for SIGUSR1 before listing the WebApps (the benchmark sends it when it has created them).")
	)
	pflag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = *qps, *burst
	// One bucket for both clientsets, as the operators have.
	if *qps > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(*qps, *burst)
	}
	cfg.UserAgent = "handroll-bench-floor"
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	// Installed before /readyz answers, so that a SIGUSR1 sent once it
	// does cannot kill the process (its default action).
	start := make(chan os.Signal, 1)
	signal.Notify(start, syscall.SIGUSR1)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)

	registry := server.NewRegistry()
	server.RegisterClientGoMetrics(registry)
	if err := serve(*metricsAddr, "/metrics", server.MetricsHandler(registry)); err != nil {
		return err
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if err := serve(*healthAddr, "/readyz", ok); err != nil {
		return err
	}

	if *waitSignal {
		select {
		case <-start:
		case <-stop:
			return nil
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- converge(ctx, client, kube, *workers) }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "floor: done; waiting for SIGTERM")
	case <-stop:
		return nil
	}
	<-stop
	return nil
}

// serve answers path on addr in the background; the listener is bound
// before it returns, so a taken port fails the start.
func serve(addr, path string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(l) }()
	return nil
}

var applyOptions = metav1.ApplyOptions{FieldManager: webapp.FieldManager, Force: true}

// converge lists every WebApp once, in pages, and writes each one's
// children and status with workers goroutines.
func converge(ctx context.Context, client clientset.Interface, kube kubernetes.Interface, workers int) error {
	queue := make(chan *handrollv1.WebApp)
	errs := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w := range queue {
				if err := write(ctx, client, kube, w); err != nil {
					errs <- fmt.Errorf("WebApp %s/%s: %w", w.Namespace, w.Name, err)
					cancel()
					return
				}
			}
		})
	}

	var listErr error
	opts := metav1.ListOptions{Limit: 500}
list:
	for {
		page, err := client.HandrollV1().WebApps(metav1.NamespaceAll).List(ctx, opts)
		if token := expiredContinue(err); token != "" {
			opts.Continue = token
			continue
		}
		if err != nil {
			listErr = err
			break
		}
		for i := range page.Items {
			select {
			case queue <- &page.Items[i]:
			case <-ctx.Done():
				break list
			}
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			break
		}
	}
	close(queue)
	wg.Wait()
	close(errs)
	for err := range errs {
		listErr = errors.Join(listErr, err)
	}
	return listErr
}

// expiredContinue is the token that resumes a list whose continue token
// expired, or "". At large N, writing a page's WebApps outlasts the API
// server's compaction (every 5 minutes), which expires the token; the
// error then carries one that resumes after the last key, at the newest
// revision. It misses no WebApp here: all were created before the floor
// started, and the floor changes only their status.
func expiredContinue(err error) string {
	var s apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &s) {
		return ""
	}
	return s.Status().Continue
}

// write applies w's children, then its status. Server-side apply costs one
// request per object whether or not it exists, and needs no read first.
func write(ctx context.Context, client clientset.Interface, kube kubernetes.Interface, w *handrollv1.WebApp) error {
	handrollv1.SetObjectDefaults_WebApp(w)
	var refCM *corev1.ConfigMap
	if ref := w.Spec.ConfigMapRef; ref != nil {
		cm, err := kube.CoreV1().ConfigMaps(w.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			refCM = cm
		}
	}
	if cm := webapp.DesiredConfigMap(w); cm != nil {
		if _, err := kube.CoreV1().ConfigMaps(w.Namespace).Apply(ctx, cm, applyOptions); err != nil {
			return err
		}
	}
	if _, err := kube.CoreV1().Services(w.Namespace).Apply(ctx, webapp.DesiredService(w), applyOptions); err != nil {
		return err
	}
	d, err := kube.AppsV1().Deployments(w.Namespace).Apply(ctx, webapp.DesiredDeployment(w, refCM), applyOptions)
	if err != nil {
		return err
	}

	status := webapp.ComputeStatus(w, webapp.Observed{Deployment: d, ServiceExists: true}, metav1.Now())
	data, err := json.Marshal(status)
	if err != nil {
		return err
	}
	st := &handrollac.WebAppStatusApplyConfiguration{}
	if err := json.Unmarshal(data, st); err != nil {
		return err
	}
	_, err = client.HandrollV1().WebApps(w.Namespace).ApplyStatus(ctx, handrollac.WebApp(w.Name, w.Namespace).WithStatus(st), applyOptions)
	return err
}
