package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
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
// names the Manager option or method it replaces, and its errors name the
// step ("step 5, clients: ..."). Steps 3 to 7 build what every scope shares
// (process); steps 8 to 12 run the WebApps' scopes: the single leader's,
// one over every WebApp, or with --shards this replica's share of the
// ranges (sharded.go). It returns when ctx is cancelled and everything has
// stopped, when a component fails, or at once when the leader lease is
// lost (leader.ErrLeaseLost).
func start(ctx context.Context, o options) error {
	klog.InfoS("Starting handroll", "version", version)
	setMemoryLimit("/")

	// Steps 3 to 5 — config, scheme, clients and the RESTMapper.
	p, err := connect(o)
	if err != nil {
		return err
	}

	// Step 6 — the elector and the HTTP servers, bound first.
	if err := p.serve(); err != nil {
		return err
	}
	// On an early return, a lost Lease included, --webhook-url is put back
	// (bounded) and the servers are told to stop but not waited for; step
	// 12 stops them in order.
	defer p.srvs.abandon()

	// Step 7 — events (mgr.GetEventRecorderFor).
	if err := p.events(); err != nil {
		return err
	}

	// Steps 8 to 12 — the WebApps' scopes, each fenced by a Lease.
	if p.o.shards > 0 {
		return startSharded(ctx, p)
	}
	return runLeader(ctx, p)
}

// process is what steps 3 to 7 build, once per process, and every scope
// shares: the Manager's cluster (config, scheme, clients), its elector and
// servers, and its events.
type process struct {
	o        options
	cfg      *rest.Config
	scheme   *runtime.Scheme
	kube     kubernetes.Interface
	handroll clientset.Interface
	// informers is handroll for the WebApps' informers: it decodes
	// without what their cache drops (handrollcache.InformerClient).
	informers clientset.Interface
	metadata  metadata.Interface

	elector  *leader.Elector
	registry *prometheus.Registry
	health   *server.Health
	srvs     *servers

	recorder    events.EventRecorder
	broadcaster events.EventBroadcaster
	eventSink   *flushingSink
}

// connect is steps 3 to 5: the config, the scheme, the clients, and the
// WebApp's REST mapping as proof that the CRD is served.
func connect(o options) (*process, error) {
	// Step 3 — config (ctrl.GetConfigOrDie, Options.QPS/Burst via rest.Config).
	cfg, source, err := loadConfig(o.kubeconfig, o.kubeAPIQPS, o.kubeAPIBurst, o.kubeAPITimeout)
	if err != nil {
		return nil, fmt.Errorf("step 3, config: %w", err)
	}
	withCompression(cfg, o.kubeAPIGzip)
	klog.InfoS("Using cluster", "host", cfg.Host, "from", source, "qps", cfg.QPS, "burst", cfg.Burst, "compression", !cfg.DisableCompression)
	o = resolveNamespaces(o)
	klog.InfoS("Operator namespace", "namespace", o.operatorNamespace, "lease", klog.KRef(o.leader.LeaseNamespace, o.leader.LeaseName))
	o = localWebhooks(o, source == inClusterSource)

	// Step 4 — scheme (Options.Scheme): built explicitly, once.
	s, err := scheme.New()
	if err != nil {
		return nil, fmt.Errorf("step 4, scheme: %w", err)
	}
	webAppKind, err := scheme.KindFor(s, &handrollv1.WebApp{})
	if err != nil {
		return nil, fmt.Errorf("step 4, scheme: %w", err)
	}

	// Step 5 — clients (client.Client for writes, GetAPIReader for uncached
	// reads): the generated typed clientset and client-go's. The metadata
	// client only lists and watches (the metadata caches).
	p := &process{o: o, cfg: cfg, scheme: s}
	if p.handroll, err = clientset.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("step 5, clients: %w", err)
	}
	if p.informers, err = handrollcache.InformerClient(cfg, p.handroll); err != nil {
		return nil, fmt.Errorf("step 5, clients: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("step 5, clients: %w", err)
	}
	p.kube = kube
	if p.metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("step 5, clients: %w", err)
	}
	// RESTMapper (mgr.GetRESTMapper, apiutil.NewDynamicRESTMapper): lazy
	// discovery. Asking it for the WebApp's resource now turns a missing
	// CRD into a clear error instead of informers retrying a 404 for ever.
	mapper, err := restmapper.New(kube.Discovery(), restmapper.Options{})
	if err != nil {
		return nil, fmt.Errorf("step 5, clients: %w", err)
	}
	mapping, err := mapper.RESTMapping(webAppKind.GroupKind(), webAppKind.Version)
	if err != nil {
		return nil, fmt.Errorf("step 5, clients: the API server does not serve %s (is the CRD installed? kubectl apply -k manifests/crd): %w", webAppKind, err)
	}
	klog.V(2).InfoS("WebApp is served", "resource", mapping.Resource, "scope", mapping.Scope.Name())
	return p, nil
}

// serve is step 6 (Options.Metrics, HealthProbeBindAddress, WebhookServer):
// the HTTP servers bind first, so a port conflict fails before anything
// else starts, and /healthz answers while the caches fill.
func (p *process) serve() error {
	p.registry = server.NewRegistry()
	server.RegisterClientGoMetrics(p.registry)

	// The elector is built here, before anything runs, so that inconsistent
	// --leader-elect-* flags fail the start at once. It has its own
	// rest.Config: renewals must not queue behind the controller's requests.
	elector, err := leader.New(p.cfg, p.o.leader, p.registry)
	if err != nil {
		return fmt.Errorf("step 6, leader election: %w", err)
	}
	if err := errors.Join(validateShards(p.o), validateLeaseNames(p.o), validateFirstStatusGrace(p.o)); err != nil {
		return fmt.Errorf("step 6, leader election: %w", err)
	}
	p.elector = elector
	p.health = &server.Health{}
	p.health.AddLivenessCheck(server.Ping)
	p.health.AddLivenessCheck(elector.HealthCheck())
	addReadiness(p.health)
	if p.srvs, err = newServers(p.cfg, p.kube, p.scheme, p.o, p.health, p.registry); err != nil {
		return fmt.Errorf("step 6, servers: %w", err)
	}
	p.srvs.serve(p.o.shutdownTimeout)
	return nil
}

// events is step 7 (mgr.GetEventRecorderFor): an events.k8s.io/v1
// broadcaster; one recorder for every controller. Events get a client, and
// so a rate limiter, of their own, as kube-scheduler's do: they are
// best-effort, and a burst of them (one per child created) must not hold
// back the writes that converge.
func (p *process) events() error {
	eventClient, err := kubernetes.NewForConfig(withOwnBucket(p.cfg, p.cfg.QPS, p.cfg.Burst))
	if err != nil {
		return fmt.Errorf("step 7, events: %w", err)
	}
	p.eventSink = &flushingSink{EventSink: &events.EventSinkImpl{Interface: eventClient.EventsV1()}}
	p.broadcaster = events.NewBroadcaster(p.eventSink)
	p.recorder = p.broadcaster.NewRecorder(p.scheme, "handroll")
	return nil
}

// runLeader is steps 8 to 12 for the single leader: one scope over every
// WebApp (or --namespaces), under --leader-elect-resource-name.
func runLeader(ctx context.Context, p *process) error {
	// Step 8 — cache (cluster.New, cache.Options): informers for WebApps
	// and for the children, in every namespace or in --namespaces
	// (DefaultNamespaces). Deployments, Services and ConfigMaps are cached
	// whole only when labelled managed-by=handroll (ByObject label
	// selectors); of every other one, the metadata alone, trimmed
	// (builder.OnlyMetadata): enough to see a child's name taken and a
	// referenced ConfigMap change. managedFields are dropped before objects
	// are stored (DefaultTransform).
	all := scope{}
	caches := handrollcache.New(p.kube, p.informers, p.metadata, p.cacheOptions(all))
	informerSet, err := webAppInformers(caches)
	if err != nil {
		return fmt.Errorf("step 8, cache: %w", err)
	}
	// Without warm standby a standby has no caches to wait for: it is ready
	// to serve its webhooks and to take over.
	warm := p.o.leader.WarmStandby || !p.o.leader.Enabled
	servesConversion := p.o.webhookPort != 0
	p.health.SetReadinessCheck(leaderSyncCheck(caches, servesConversion, func() bool { return warm || isClosed(p.elector.Elected()) }))
	if servesConversion {
		p.health.AddReadinessReport(conversionReport(caches))
	}

	// Step 9 — controllers (controller.New + builder.For/Owns/Watches): the
	// scope's two.
	journal, closeJournal, err := openJournal(p.o, p.elector.Identity())
	if err != nil {
		return fmt.Errorf("step 9, controllers: %w", err)
	}
	defer closeJournal()
	controller.RegisterWorkqueueMetrics(p.registry)
	controllers, err := p.controllers(all, caches, informerSet, newWebAppReconciler(caches, p.kube, p.handroll, p.recorder, p.o.firstStatusGrace), journal)
	if err != nil {
		return fmt.Errorf("step 9, controllers: %w", err)
	}

	// Step 10 — start the caches, wait for them (bounded), then the
	// controllers. Caches first: a controller only ever reads a full cache.
	// With warm standby (the default) every replica does this before the
	// election; without, only the leader, in step 11.
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCache()
	if err := startEventWriter(cacheCtx, p.broadcaster, p.eventSink); err != nil {
		return fmt.Errorf("step 7, events: %w", err)
	}
	syncCaches := func(ctx context.Context) error { return syncLeaderCaches(ctx, caches, cacheCtx.Done(), p.o) }
	if warm {
		if err := syncCaches(ctx); err != nil {
			return err
		}
	}

	// Step 11 — leader election (LeaderElection*, mgr.Elected()). Only the
	// leader runs the controllers, inside the callback, which returns once
	// they have stopped and their in-flight reconciles have finished. Its
	// error comes back through Run: nothing is shared with its goroutine.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	election := make(chan error, 1)
	go func() {
		election <- p.elector.Run(runCtx, func(leaderCtx context.Context) error {
			return p.lead(leaderCtx, warm, syncCaches, controllers)
		})
	}()

	// Step 12 — run until a signal or a failing component, then stop in
	// reverse (stopper.stop).
	st := stopper{
		timeout:     p.o.shutdownTimeout,
		stopRun:     stopRun,
		election:    election,
		flushEvents: flushEvents(p.broadcaster, p.eventSink),
		stopCaches: func() {
			stopCache()
			caches.Shutdown()
		},
		stopServers: p.srvs.stop,
	}
	return st.waitThenStop(ctx, p.srvs.errs, "leader election", "the controllers")
}

// syncLeaderCaches is step 10: it starts the caches, until done, and
// waits, within --cache-sync-timeout, until they have synced. A stop while
// they fill is no error.
func syncLeaderCaches(ctx context.Context, caches *handrollcache.Caches, done <-chan struct{}, o options) error {
	caches.Start(done)
	syncCtx, cancelSync := context.WithTimeout(ctx, o.cacheSyncTimeout)
	defer cancelSync()
	if err := caches.WaitForSync(syncCtx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("step 10, caches not synced within --cache-sync-timeout=%s: %w", o.cacheSyncTimeout, err)
	}
	webapps, _ := caches.WebAppLister().List(labels.Everything())
	klog.InfoS("Caches synced", "namespaces", o.namespaces, "webapps", len(webapps))
	return nil
}

// lead is the leader's work, step 11's callback: once no sharded replica
// is live, the caches (without warm standby), then the controllers, until
// ctx ends.
func (p *process) lead(ctx context.Context, warm bool, syncCaches func(context.Context) error, controllers *scopeControllers) error {
	klog.InfoS("Leading; starting the controllers", "identity", p.elector.Identity(), "warmStandby", warm)
	if p.o.leader.Enabled {
		if err := waitForNoShards(ctx, p.kube, p.o); err != nil {
			return err
		}
		if isClosed(ctx.Done()) {
			return nil // stopped while it waited
		}
	}
	if !warm {
		if err := syncCaches(ctx); err != nil || ctx.Err() != nil {
			return err // a stop while the caches filled is no error
		}
	}
	return controllers.run(ctx)
}

// waitThenStop waits for a signal (ctx), a failing server or the end of
// the election, then stops. election names the election and work what ran
// under it, in the errors.
func (s stopper) waitThenStop(ctx context.Context, serverErrs <-chan error, election, work string) error {
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serverErrs:
		runErr = fmt.Errorf("step 6, servers: %w", err)
	case err := <-s.election:
		if leader.Unfenced(err) {
			// Another replica may lead already, or will once the kept
			// Lease expires: stop now, without draining or writing.
			return fmt.Errorf("step 11, %s: %w", election, err)
		}
		runErr = fmt.Errorf("step 11, %s stopped: %w", work, err)
		s.election = nil
	}
	return s.stop(runErr)
}

// flushEvents is step 12's flush of the events still queued, within budget
// (at most 5 s).
func flushEvents(broadcaster events.EventBroadcaster, sink *flushingSink) func(budget time.Duration) {
	return func(budget time.Duration) {
		broadcaster.Shutdown()
		if !sink.Flush(200*time.Millisecond, min(budget, 5*time.Second)) {
			klog.InfoS("Some events may not have been written before the stop")
		}
	}
}

// webAppInformers requests the informers the WebApp controller watches
// from caches, and adds its index to the WebApps' (before they start).
func webAppInformers(caches *handrollcache.Caches) (webapp.Informers, error) {
	webapps := caches.WebApps()
	for _, inf := range webapps {
		if err := webapp.AddIndexers(inf); err != nil {
			return webapp.Informers{}, err
		}
	}
	return webapp.Informers{
		WebApps:     webapps,
		Deployments: caches.Deployments(),
		Services:    caches.Services(),
		ConfigMaps:  caches.ConfigMaps(),

		DeploymentMetadata: caches.Metadata(handrollcache.DeploymentsResource),
		ServiceMetadata:    caches.Metadata(handrollcache.ServicesResource),
		ConfigMapMetadata:  caches.Metadata(handrollcache.ConfigMapsResource),
	}, nil
}

// newWebAppReconciler is the WebApp reconciler on caches: it reads their
// listers and writes through the clients.
func newWebAppReconciler(caches *handrollcache.Caches, kube kubernetes.Interface, handroll clientset.Interface, recorder events.EventRecorder, firstStatusGrace time.Duration) *webapp.Reconciler {
	return &webapp.Reconciler{
		WebApps:               caches.WebAppLister(),
		Deployments:           caches.DeploymentLister(),
		Services:              caches.ServiceLister(),
		ConfigMaps:            caches.ConfigMapLister(),
		Client:                handroll,
		StatusClient:          handroll.HandrollV1().RESTClient(),
		Kube:                  kube,
		Recorder:              recorder,
		ChildrenCacheFiltered: true,
		DeploymentMeta:        caches.MetadataLister(handrollcache.DeploymentsResource),
		ServiceMeta:           caches.MetadataLister(handrollcache.ServicesResource),
		ConfigMapMeta:         caches.MetadataLister(handrollcache.ConfigMapsResource),
		RefConfigMaps:         &webapp.RefConfigMaps{Kube: kube},
		Progress:              &webapp.ProgressWrites{Interval: webapp.DefaultProgressWriteInterval, FirstGrace: firstStatusGrace},
	}
}

// drainTimeout is how long the controllers may take, after the stop begins,
// to finish their in-flight reconciles: the shutdown timeout less a margin
// (a quarter of it, at most 5 s) for what must follow within it, the
// Lease's release first, then the events' flush.
func drainTimeout(shutdown time.Duration) time.Duration {
	return shutdown - min(shutdown/4, 5*time.Second)
}

// runControllers runs the leader's controllers, which share the informers
// as a Manager's controllers share its cache, and returns once all have
// stopped, with their errors. One that stops on its own or fails stops the
// others: the process then exits, as the Manager does when a runnable fails.
// A reconcile that outlived its controller's drain keeps the Lease held
// (leader.ErrWorkStillRunning): it may still write, so no standby may lead
// before the process has exited.
func runControllers(ctx context.Context, controllers ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(controllers))
	var wg sync.WaitGroup
	for i, run := range controllers {
		wg.Go(func() {
			defer cancel()
			errs[i] = run(ctx)
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if errors.Is(err, controller.ErrStillRunning) {
		return fmt.Errorf("%w: %w", leader.ErrWorkStillRunning, err)
	}
	return err
}

// stopper is step 12: it stops what start started, in reverse, within
// timeout (--graceful-shutdown-timeout).
type stopper struct {
	timeout time.Duration
	// stopRun ends the election's context: the controllers drain, then
	// the Lease is released.
	stopRun context.CancelFunc
	// election delivers leader.Elector.Run's result; nil when it was
	// received already.
	election    <-chan error
	flushEvents func(budget time.Duration)
	stopCaches  func()
	stopServers func() error
}

// stop runs the stop sequence and returns runErr joined with what failed on
// the way: the controllers (their in-flight reconciles finish, then the
// Lease is released), the events flushed, the informers, the servers.
//
// An unfenced stop (leader.Unfenced, where the rule is stated) ends it at
// once, in whatever phase: a lost Lease, as another replica may lead
// already, and this one must neither write (an Event, a status) nor wait
// for anything; a reconcile still running after the drain, as its Lease is
// kept and expires a lease duration after its last renewal. The Lease can
// only be lost until Run returns; the later phases hold nothing another
// replica could take over.
func (s stopper) stop(runErr error) error {
	klog.InfoS("Stopping", "timeout", s.timeout)
	deadline := time.NewTimer(s.timeout)
	defer deadline.Stop()
	end := time.Now().Add(s.timeout)
	timedOut := func(what string) error {
		return errors.Join(runErr, fmt.Errorf("step 12, stop: %s within --graceful-shutdown-timeout=%s", what, s.timeout))
	}

	s.stopRun()
	if s.election != nil {
		select {
		case err := <-s.election:
			if errors.Is(err, leader.ErrLeaseLost) {
				return errors.Join(runErr, fmt.Errorf("step 11, leader election: %w", err))
			}
			if errors.Is(err, leader.ErrWorkStillRunning) {
				// The Lease is kept, unrenewed: the process must be gone
				// before it expires, so nothing else is waited for.
				return errors.Join(runErr, fmt.Errorf("step 11, the controllers: %w", err))
			}
			if err != nil {
				runErr = errors.Join(runErr, fmt.Errorf("step 11, the controllers: %w", err))
			}
		case <-deadline.C:
			return timedOut("the controllers did not stop")
		}
	}

	rest := make(chan error, 1)
	go func() {
		s.flushEvents(time.Until(end))
		s.stopCaches()
		rest <- s.stopServers()
	}()
	select {
	case err := <-rest:
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("step 6, servers: %w", err))
		}
		return runErr
	case <-deadline.C:
		return timedOut("the events, informers and servers did not stop")
	}
}

// servers are step 6's HTTP servers, and the runnables that keep the
// webhook and metrics servers' certificates current.
type servers struct {
	list            []*server.Server
	runCertificates []func(context.Context)
	// restoreClientConfigs undoes --webhook-url's repointing; nil without.
	restoreClientConfigs func(context.Context)

	errs        chan error // a server that failed while serving
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	restoreOnce sync.Once
	stopOnce    sync.Once
	stopErr     error
}

// newServers builds and binds the metrics, health, webhook and pprof
// servers that o asks for.
func newServers(cfg *rest.Config, kubeClient kubernetes.Interface, s *runtime.Scheme, o options, health *server.Health, registry *prometheus.Registry) (*servers, error) {
	// The API server's own readiness, asked at most once a second with a
	// client of its own, is reported at /readyz/api-server and in
	// /readyz?verbose but is not part of /readyz: it is the same for every
	// replica, and one flaky API server would take every replica out of the
	// webhook Service at once. A replica is ready when it can serve its
	// webhooks (certificate loaded) and, when it needs them, its caches are
	// synced.
	probeClient, err := kubernetes.NewForConfig(withOwnBucket(cfg, 1, 1))
	if err != nil {
		return nil, err
	}
	health.AddReadinessReport(server.APIServerCheck(probeClient.Discovery().RESTClient(), time.Second, 5*time.Second))

	out := &servers{}
	if err := validateMetricsFlags(o); err != nil {
		return nil, err
	}
	// The admission and conversion webhooks (WebhookServer), on every
	// replica: the API server calls whichever is there. The certificate is
	// reloaded when its files change (certwatcher) or, self-managed, kept in
	// a Secret all replicas share and rotated before it expires. Built
	// before the metrics server, whose certificate their CA may sign.
	var webhooks webhookParts
	if o.webhookPort != 0 {
		if webhooks, err = webhookServer(cfg, kubeClient, s, o, health, registry); err != nil {
			return nil, err
		}
		out.runCertificates = append(out.runCertificates, webhooks.start)
		out.restoreClientConfigs = webhooks.restore
	} else {
		klog.InfoS("Not serving the webhooks: --webhook-port=0")
	}
	if o.metricsAddr != "0" {
		handler, tlsConfig, run, err := metricsHandler(cfg, registry, o.metricsSecure, o.metricsCertDir, webhooks.metricsCert)
		if err != nil {
			return nil, err
		}
		out.list = append(out.list, &server.Server{Name: "metrics", Addr: o.metricsAddr, Handler: handler, TLS: tlsConfig})
		if run != nil {
			out.runCertificates = append(out.runCertificates, run)
		}
	}
	if o.healthAddr != "0" {
		mux := http.NewServeMux()
		health.Register(mux)
		out.list = append(out.list, &server.Server{Name: "health", Addr: o.healthAddr, Handler: mux})
	}
	if webhooks.srv != nil {
		out.list = append(out.list, webhooks.srv)
	}
	if o.pprofAddr != "" && o.pprofAddr != "0" {
		out.list = append(out.list, &server.Server{Name: "pprof", Addr: o.pprofAddr, Handler: server.PprofHandler()})
	}
	for _, srv := range out.list {
		if err := srv.Listen(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// validateMetricsFlags refuses a --metrics-cert-dir or
// --metrics-ca-configmap that could not be used. Neither turns
// --metrics-secure on by itself: that flag also makes every scrape need a
// token and RBAC, which a certificate alone must not impose on the
// scrapers without being asked.
func validateMetricsFlags(o options) error {
	if err := validateMetricsCA(o); err != nil {
		return err
	}
	switch {
	case o.metricsCertDir == "":
		return nil
	case !o.metricsSecure:
		return errors.New("--metrics-cert-dir needs --metrics-secure: plain-HTTP metrics serve no certificate")
	case o.metricsAddr == "0":
		return errors.New("--metrics-cert-dir needs the metrics server: --metrics-bind-address is 0")
	}
	return nil
}

// validateMetricsCA refuses --metrics-ca-configmap, and
// --metrics-service-name, where there is no self-managed CA to publish or
// no certificate of it to serve.
func validateMetricsCA(o options) error {
	const flag = "--metrics-ca-configmap"
	switch {
	case o.metricsCA.configMap == "" && o.metricsCA.serviceNameSet:
		return errors.New("--metrics-service-name needs " + flag + ": only the certificate the self-managed CA signs carries the Service's names")
	case o.metricsCA.configMap == "":
		return nil
	case !o.metricsSecure:
		return errors.New(flag + " needs --metrics-secure: plain-HTTP metrics serve no certificate")
	case o.metricsAddr == "0":
		return errors.New(flag + " needs the metrics server: --metrics-bind-address is 0")
	case o.metricsCertDir != "":
		return errors.New(flag + " and --metrics-cert-dir both choose the metrics certificate: give one")
	case o.webhookCertDir != "":
		return errors.New(flag + " publishes the self-managed CA, which --webhook-cert-dir turns off: scrapers verify a certificate from files against its own CA")
	case o.webhookPort == 0:
		return errors.New(flag + " needs the self-managed CA, which runs with the webhook server: the webhooks are off (--webhook-port=0, or outside the cluster without --webhook-url)")
	}
	return nil
}

// metricsHandler serves the registry at /metrics. Secure: over HTTPS, and
// each scrape authenticated (TokenReview) and authorized
// (SubjectAccessReview for get /metrics), as controller-runtime's
// WithAuthenticationAndAuthorization. The reviews have a client and a rate
// limit of their own: on the controllers' they would wait behind the
// reconciles, and scrapes would fail exactly under load.
//
// The certificate is caSigned's when set (--metrics-ca-configmap: the
// self-managed CA signs it, kept current by the webhooks' certificate
// manager); else the files certDir names (Metrics.CertDir), read now, an
// error if they do not load, and then kept current by run, the same
// certwatcher as the webhook server's; else self-signed, made in memory.
// run is nil when there are no files to watch.
func metricsHandler(cfg *rest.Config, registry *prometheus.Registry, secure bool, certDir string,
	caSigned func(*tls.ClientHelloInfo) (*tls.Certificate, error),
) (h http.Handler, tlsConfig *tls.Config, run func(context.Context), err error) {
	mux := http.NewServeMux()
	if !secure {
		mux.Handle("/metrics", server.MetricsHandler(registry))
		return mux, nil, nil, nil
	}
	switch {
	case caSigned != nil:
		// Until the first one is issued (the Secret's first sync) a
		// handshake fails; nothing else waits on it.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: caSigned}
	case certDir == "":
		if tlsConfig, err = server.SelfSignedTLS(); err != nil {
			return nil, nil, nil, err
		}
	default:
		cw, err := server.NewCertWatcher(certDir, server.CertWatcherOptions{})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--metrics-cert-dir: %w", err)
		}
		// No readiness check: the pair loaded, and an expired one fails
		// the scrapes (and the expiry alert) without taking the replica
		// out of the webhook Service.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
		run = func(ctx context.Context) {
			if err := cw.Start(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Metrics certificate watcher stopped")
			}
		}
	}
	reviewClient, err := kubernetes.NewForConfig(withOwnBucket(cfg, metricsReviewQPS, metricsReviewBurst))
	if err != nil {
		return nil, nil, nil, err
	}
	mux.Handle("/metrics", server.WithAuthenticationAndAuthorization(reviewClient, 10*time.Second, server.MetricsHandler(registry)))
	return mux, tlsConfig, run, nil
}

// The metrics reviews' own budget. A scraper's decision is cached for 10 s,
// so a few scrapers cost well under one review a second.
const (
	metricsReviewQPS   = 5
	metricsReviewBurst = 10
)

// serve starts every server, and the certificate runnable, until stop.
func (s *servers) serve(shutdownTimeout time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.errs = make(chan error, len(s.list))
	for _, run := range s.runCertificates {
		s.wg.Go(func() { run(ctx) })
	}
	for _, srv := range s.list {
		s.wg.Go(func() {
			if err := srv.Serve(ctx, shutdownTimeout); err != nil {
				s.errs <- err
			}
		})
	}
}

// stop shuts the servers down gracefully, waits for them, and returns what
// failed while they served or stopped. It may be called more than once.
func (s *servers) stop() error {
	s.stopOnce.Do(func() {
		s.restore()
		s.cancel()
		s.wg.Wait()
		close(s.errs)
		for err := range s.errs {
			s.stopErr = errors.Join(s.stopErr, err)
		}
	})
	return s.stopErr
}

// restore points the webhook configurations and the CRD's conversion back
// at what they called before --webhook-url, once, within 10 s, while the
// webhooks still answer, so that the API server switches back before this
// process stops serving them. It writes no WebApp: it is safe after the
// Lease is lost too.
func (s *servers) restore() {
	s.restoreOnce.Do(func() {
		if s.restoreClientConfigs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.restoreClientConfigs(ctx)
			cancel()
		}
	})
}

// abandon is the stop of an early return: restore, then tell the servers
// to stop without waiting for them.
func (s *servers) abandon() {
	s.restore()
	if s.cancel != nil {
		s.cancel()
	}
}

// withOwnBucket copies cfg with a client-side rate limiter of its own, of
// qps and burst: clients made from the copy neither wait behind the
// controllers' requests nor spend their budget (rest.CopyConfig would share
// cfg's limiter; with none, client-go makes one from QPS and Burst).
func withOwnBucket(cfg *rest.Config, qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	c.QPS, c.Burst = qps, burst
	return c
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
