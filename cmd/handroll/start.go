package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/restmapper"
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
	webAppKind, err := scheme.KindFor(s, &handrollv1.WebApp{})
	if err != nil {
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
	// RESTMapper (mgr.GetRESTMapper, apiutil.NewDynamicRESTMapper): lazy
	// discovery. Asking it for the WebApp's resource now turns a missing
	// CRD into a clear error instead of informers retrying a 404 for ever.
	mapper, err := restmapper.New(kubeClient.Discovery(), restmapper.Options{})
	if err != nil {
		return err
	}
	mapping, err := mapper.RESTMapping(webAppKind.GroupKind(), webAppKind.Version)
	if err != nil {
		return fmt.Errorf("the API server does not serve %s (is the CRD installed? kubectl apply -k manifests/crd): %w", webAppKind, err)
	}
	klog.V(2).InfoS("WebApp is served", "resource", mapping.Resource, "scope", mapping.Scope.Name())

	// Step 6 — HTTP servers (Options.Metrics, HealthProbeBindAddress). They
	// bind first, so a port conflict fails before anything else starts, and
	// /healthz answers while the caches fill.
	registry := server.NewRegistry()
	server.RegisterClientGoMetrics(registry)

	// The elector is built here, before anything runs, so that inconsistent
	// --leader-elect-* flags fail the start at once. It has its own
	// rest.Config: renewals must not queue behind the controller's requests.
	elector, err := leader.New(cfg, o.leader, registry)
	if err != nil {
		return err
	}

	health := &server.Health{}
	health.AddLivenessCheck(server.Ping)
	health.AddLivenessCheck(elector.HealthCheck())
	health.AddReadinessCheck(server.Ping)
	// The API server's own readiness: an outage (the API server or its etcd
	// down, or unreachable) shows in /readyz. Its client has a limiter of
	// its own, and the check asks at most once a second however often it
	// is probed.
	probeConfig := rest.CopyConfig(cfg)
	probeConfig.RateLimiter = nil
	probeConfig.QPS, probeConfig.Burst = 1, 1
	probeClient, err := kubernetes.NewForConfig(probeConfig)
	if err != nil {
		return err
	}
	health.AddReadinessCheck(server.APIServerCheck(probeClient.Discovery().RESTClient(), time.Second, 5*time.Second))
	var servers []*server.Server
	if o.metricsAddr != "0" {
		mux := http.NewServeMux()
		metrics := &server.Server{Name: "metrics", Addr: o.metricsAddr, Handler: mux}
		if o.metricsSecure {
			// HTTPS, and each scrape authenticated (TokenReview) and
			// authorized (SubjectAccessReview for get /metrics), as
			// controller-runtime's WithAuthenticationAndAuthorization.
			if metrics.TLS, err = server.SelfSignedTLS(); err != nil {
				return err
			}
			mux.Handle("/metrics", server.WithAuthenticationAndAuthorization(kubeClient, 10*time.Second, server.MetricsHandler(registry)))
		} else {
			mux.Handle("/metrics", server.MetricsHandler(registry))
		}
		servers = append(servers, metrics)
	}
	if o.healthAddr != "0" {
		mux := http.NewServeMux()
		health.Register(mux)
		servers = append(servers, &server.Server{Name: "health", Addr: o.healthAddr, Handler: mux})
	}
	// The admission and conversion webhooks (WebhookServer), on every
	// replica: the API server calls whichever is there. The certificate is
	// reloaded when its files change (certwatcher) or, self-managed, kept in
	// a Secret all replicas share and rotated before it expires.
	var runCertificates func(context.Context)
	if o.webhookPort != 0 {
		webhooks, run, err := webhookServer(cfg, kubeClient, s, o, health)
		if err != nil {
			return err
		}
		servers = append(servers, webhooks)
		runCertificates = run
	} else {
		klog.InfoS("Not serving the webhooks: --webhook-port=0")
	}
	if o.pprofAddr != "" && o.pprofAddr != "0" {
		servers = append(servers, &server.Server{Name: "pprof", Addr: o.pprofAddr, Handler: server.PprofHandler()})
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
	if runCertificates != nil {
		serving.Add(1)
		go func() {
			defer serving.Done()
			runCertificates(serversCtx)
		}()
	}
	for _, srv := range servers {
		serving.Add(1)
		go func() {
			defer serving.Done()
			if err := srv.Serve(serversCtx, o.shutdownTimeout); err != nil {
				serveErrs <- err
			}
		}()
	}

	// Step 7 — events (mgr.GetEventRecorderFor): an events.k8s.io/v1
	// broadcaster; one recorder for the one controller.
	// Events get a client, and so a rate limiter, of their own, as
	// kube-scheduler's do: they are best-effort, and a burst of them (one
	// per child created) must not hold back the writes that converge.
	eventConfig := rest.CopyConfig(cfg)
	eventConfig.RateLimiter = nil // a bucket of its own, from QPS and Burst
	eventClient, err := kubernetes.NewForConfig(eventConfig)
	if err != nil {
		return err
	}
	eventSink := &flushingSink{EventSink: &events.EventSinkImpl{Interface: eventClient.EventsV1()}}
	broadcaster := events.NewBroadcaster(eventSink)
	recorder := broadcaster.NewRecorder(s, "handroll")

	// Step 8 — cache (cluster.New, cache.Options): informers for WebApps
	// and for the children, in every namespace or in --namespaces
	// (DefaultNamespaces). Deployments and Services are cached only when
	// labelled managed-by=handroll (ByObject label selectors); ConfigMaps
	// whole, because a spec.configMapRef names a ConfigMap of the user's.
	// managedFields are dropped before objects are stored (DefaultTransform).
	caches := handrollcache.New(kubeClient, handrollClient, handrollcache.Options{
		Namespaces:        o.namespaces,
		ChildSelector:     webapp.LabelManagedBy + "=" + webapp.ManagedBy,
		SyncPeriod:        o.syncPeriod,
		OperatorNamespace: o.operatorNamespace,
	})
	webappInformers := caches.WebApps()
	for _, inf := range webappInformers {
		if err := webapp.AddIndexers(inf); err != nil {
			return err
		}
	}
	informerSet := webapp.Informers{
		WebApps:     webappInformers,
		Deployments: caches.Deployments(),
		Services:    caches.Services(),
		ConfigMaps:  caches.ConfigMaps(),
	}
	// Without warm standby a standby has no caches to wait for: it is ready
	// to serve its webhooks and to take over.
	warm := o.leader.WarmStandby || !o.leader.Enabled
	health.AddReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if !warm && !isClosed(elector.Elected()) {
			return nil
		}
		if !caches.HasSynced() {
			return errors.New("the informers have not synced")
		}
		return nil
	}})

	// Step 9 — controllers (controller.New + builder.For/Owns/Watches).
	controller.RegisterWorkqueueMetrics(registry)
	var journal controller.Journal
	if o.reconcileJournal != "" {
		replica := elector.Identity()
		if replica == "" {
			if replica, err = leader.NewIdentity(); err != nil {
				return err
			}
		}
		j, err := controller.OpenJournal(o.reconcileJournal, replica)
		if err != nil {
			return err
		}
		defer j.Close()
		journal = j
	}
	webappController, err := webapp.NewController(&webapp.Reconciler{
		WebApps:               caches.WebAppLister(),
		Deployments:           caches.DeploymentLister(),
		Services:              caches.ServiceLister(),
		ConfigMaps:            caches.ConfigMapLister(),
		Client:                handrollClient,
		Kube:                  kubeClient,
		Recorder:              recorder,
		ChildrenCacheFiltered: true,
	}, informerSet, controller.Options{
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Registerer:              registry,
		ShutdownTimeout:         o.shutdownTimeout,
		Journal:                 journal,
	})
	if err != nil {
		return err
	}
	// The directory's own controller, on the same informers: two
	// controllers of one Manager sharing its cache. One worker, as it has
	// one key.
	directoryController, err := webapp.NewDirectoryController(&webapp.DirectoryReconciler{
		WebApps:    caches.WebAppLister(),
		Services:   caches.ServiceLister(),
		ConfigMaps: caches.ConfigMapLister(),
		Kube:       kubeClient,
		Namespace:  o.operatorNamespace,
		Namespaces: o.namespaces,
	}, informerSet, controller.Options{
		Registerer:      registry,
		ShutdownTimeout: o.shutdownTimeout,
		Journal:         journal,
	})
	if err != nil {
		return err
	}

	// Step 10 — start the caches, wait for them (bounded), then the
	// controller. Caches first: the controller only ever reads a full cache.
	// With warm standby (the default) every replica does this before the
	// election; without, only the leader, in step 11.
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCache()
	broadcaster.StartRecordingToSink(cacheCtx.Done())
	syncCaches := func(ctx context.Context) error {
		caches.Start(cacheCtx.Done())
		syncCtx, cancelSync := context.WithTimeout(ctx, o.cacheSyncTimeout)
		defer cancelSync()
		if err := caches.WaitForSync(syncCtx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("caches not synced within --cache-sync-timeout=%s: %w", o.cacheSyncTimeout, err)
		}
		webapps, _ := caches.WebAppLister().List(labels.Everything())
		klog.InfoS("Caches synced", "namespaces", o.namespaces, "webapps", len(webapps))
		return nil
	}
	if warm {
		if err := syncCaches(ctx); err != nil {
			return err
		}
	}

	// Step 11 — leader election (LeaderElection*, mgr.Elected()). Only the
	// leader runs the controller, inside the callback, which returns once
	// the controller has stopped and its in-flight reconciles have finished.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var controllerErr error
	electionDone := make(chan error, 1)
	go func() {
		electionDone <- elector.Run(runCtx, func(leaderCtx context.Context) {
			klog.InfoS("Leading; starting the controller", "identity", elector.Identity(), "warmStandby", warm)
			if !warm {
				if controllerErr = syncCaches(leaderCtx); controllerErr != nil || leaderCtx.Err() != nil {
					return // a stop while the caches filled is no error
				}
			}
			controllerErr = startControllers(leaderCtx, caches.HasSynced, webappController, directoryController)
		})
	}()

	// Step 12 — run until a signal or a failing component, then stop in
	// reverse: the controller (in-flight reconciles finish, the lease is
	// released), events flushed, informers, servers.
	var runErr error
	electionReturned := false
	select {
	case <-ctx.Done():
	case runErr = <-serveErrs:
	case runErr = <-electionDone:
		electionReturned = true
	}
	if errors.Is(runErr, leader.ErrLeaseLost) {
		// Another replica may lead already: stop now, without draining.
		return runErr
	}
	if errors.Is(runErr, leader.ErrCallbackReturned) {
		runErr = fmt.Errorf("the controller stopped: %w", controllerErr)
	}
	klog.InfoS("Stopping", "timeout", o.shutdownTimeout)
	stopRun()
	done := make(chan error, 1)
	go func() {
		var err error
		if !electionReturned {
			err = <-electionDone
		}
		broadcaster.Shutdown()
		if !eventSink.Flush(200*time.Millisecond, 5*time.Second) {
			klog.InfoS("Some events may not have been written before the stop")
		}
		stopCache()
		caches.Shutdown()
		stopServers()
		serving.Wait()
		done <- errors.Join(err, controllerErr)
	}()
	select {
	case err := <-done:
		runErr = errors.Join(runErr, err)
	case <-time.After(o.shutdownTimeout):
		return errors.Join(runErr, fmt.Errorf("graceful shutdown did not finish within %s", o.shutdownTimeout))
	}
	close(serveErrs)
	for err := range serveErrs {
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// startControllers runs every controller until ctx ends and all have
// drained (mgr.Start runs its controllers as one group). When one fails,
// the others are stopped too.
func startControllers(ctx context.Context, synced cache.InformerSynced, controllers ...*controller.Controller) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(controllers))
	var wg sync.WaitGroup
	for i, c := range controllers {
		wg.Go(func() {
			if errs[i] = c.Start(ctx, synced); errs[i] != nil {
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
