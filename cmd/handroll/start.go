package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	informers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
	"github.com/handroll/handroll/pkg/server"
)

// start is the Manager's NewManager + Start, written out. Each numbered step
// names the Manager option or method it replaces. It returns when ctx is
// cancelled and everything has stopped, or when a component fails.
func start(ctx context.Context, o options) error {
	klog.InfoS("Starting handroll", "version", version)

	// Step 3 — config (ctrl.GetConfigOrDie, Options.QPS/Burst via rest.Config).
	cfg, source, err := loadConfig(o.kubeconfig, o.kubeAPIQPS, o.kubeAPIBurst, o.kubeAPITimeout)
	if err != nil {
		return err
	}
	klog.InfoS("Using cluster", "host", cfg.Host, "from", source, "qps", cfg.QPS, "burst", cfg.Burst)

	// Step 4 — scheme (Options.Scheme): built explicitly, once.
	s, err := scheme.New()
	if err != nil {
		return err
	}
	if _, err := scheme.KindFor(s, &handrollv1.WebApp{}); err != nil {
		return err
	}

	// Step 5 — clients (client.Client for writes, GetAPIReader for uncached
	// reads): the generated typed clientset and client-go's.
	handrollClient, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := checkAPIServed(kubeClient, handrollv1.SchemeGroupVersion.WithResource(handrollv1.WebAppResource)); err != nil {
		return err
	}

	// Step 6 — HTTP servers (Options.Metrics, HealthProbeBindAddress). They
	// bind first, so a port conflict fails before anything else starts, and
	// /healthz answers while the caches fill.
	registry := server.NewRegistry()
	health := &server.Health{}
	health.AddLivenessCheck(server.Ping)
	health.AddReadinessCheck(server.Ping)
	var servers []*server.Server
	if o.metricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", server.MetricsHandler(registry))
		servers = append(servers, &server.Server{Name: "metrics", Addr: o.metricsAddr, Handler: mux})
	}
	if o.healthAddr != "0" {
		mux := http.NewServeMux()
		health.Register(mux)
		servers = append(servers, &server.Server{Name: "health", Addr: o.healthAddr, Handler: mux})
	}
	for _, srv := range servers {
		if err := srv.Listen(); err != nil {
			return err
		}
	}
	serversCtx, stopServers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServers()
	serveErrs := make(chan error, len(servers))
	var serving sync.WaitGroup
	for _, srv := range servers {
		serving.Add(1)
		go func() {
			defer serving.Done()
			if err := srv.Serve(serversCtx, o.shutdownTimeout); err != nil {
				serveErrs <- err
			}
		}()
	}

	// Step 7 — cache (cluster.New, cache.Options): shared informers from the
	// generated factory, started and synced before anything reads them.
	factory := informers.NewSharedInformerFactory(handrollClient, 0)
	webapps := factory.Handroll().V1().WebApps().Informer()
	if _, err := webapps.AddEventHandler(logWebApps{}); err != nil {
		return err
	}
	health.AddReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if !webapps.HasSynced() {
			return errors.New("the WebApp informer has not synced")
		}
		return nil
	}})
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	factory.Start(cacheCtx.Done())
	syncCtx, cancelSync := context.WithTimeout(ctx, o.cacheSyncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(), webapps.HasSynced)
	cancelSync()
	if !synced && ctx.Err() == nil {
		return fmt.Errorf("the WebApp informer did not sync within --cache-sync-timeout=%s", o.cacheSyncTimeout)
	}
	klog.InfoS("Caches synced", "webapps", len(webapps.GetStore().ListKeys()))

	// Step 8 — controllers (builder.For/Owns/Watches): the WebApp reconciler
	// is not wired in yet; until it is, the cache's events are logged.

	// Step 9 — run until a signal or a failing server, then stop in reverse.
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErrs:
	}
	klog.InfoS("Stopping", "timeout", o.shutdownTimeout)
	done := make(chan struct{})
	go func() {
		stopCache()
		factory.Shutdown()
		stopServers()
		serving.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(o.shutdownTimeout):
		return errors.Join(runErr, fmt.Errorf("graceful shutdown did not finish within %s", o.shutdownTimeout))
	}
	close(serveErrs)
	for err := range serveErrs {
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// checkAPIServed fails with a clear message when the WebApp CRD is not
// installed, rather than letting an informer retry a 404 forever.
func checkAPIServed(client kubernetes.Interface, gvr schema.GroupVersionResource) error {
	resources, err := client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return fmt.Errorf("the API server does not serve %s (is the CRD installed? kubectl apply -k manifests/crd): %w", gvr.GroupVersion(), err)
	}
	for _, r := range resources.APIResources {
		if r.Name == gvr.Resource {
			return nil
		}
	}
	return fmt.Errorf("the API server serves %s but not %s; install the current CRD from manifests/crd", gvr.GroupVersion(), gvr.Resource)
}

// logWebApps logs what the WebApp informer sees.
type logWebApps struct{}

func (logWebApps) OnAdd(obj any, initial bool) {
	if w, ok := obj.(*handrollv1.WebApp); ok {
		klog.V(2).InfoS("WebApp seen", "webapp", klog.KObj(w), "initialList", initial)
	}
}

func (logWebApps) OnUpdate(_, obj any) {
	if w, ok := obj.(*handrollv1.WebApp); ok {
		klog.V(2).InfoS("WebApp updated", "webapp", klog.KObj(w), "generation", w.Generation)
	}
}

func (logWebApps) OnDelete(obj any) {
	if w, ok := obj.(*handrollv1.WebApp); ok {
		klog.V(2).InfoS("WebApp deleted", "webapp", klog.KObj(w))
	}
}
