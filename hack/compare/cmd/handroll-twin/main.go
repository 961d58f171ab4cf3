// Command handroll-twin is handroll's WebApp operator on controller-runtime:
// the same reconciler behaviour, flags and defaults, with ctrl.NewManager in
// place of everything cmd/handroll wires by hand. It serves no webhooks.
// --tuned turns on the controller-runtime options that match handroll's
// design (hack/compare/README.md lists them).
package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubeconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/leader"
)

// options are cmd/handroll's flags that the twin supports, with the same
// names and defaults.
type options struct {
	kubeAPIQPS              float32
	kubeAPIBurst            int
	kubeAPITimeout          time.Duration
	metricsAddr, healthAddr string
	pprofAddr               string
	metricsSecure           bool
	webhookPort             int
	namespaces              []string
	syncPeriod              time.Duration
	firstStatusGrace        time.Duration
	cacheSyncTimeout        time.Duration
	shutdownTimeout         time.Duration
	maxConcurrentReconciles int
	operatorNamespace       string
	leader                  leader.Options
	// warmup is config.Controller.EnableWarmup: --leader-elect-warm-standby
	// when given, else --tuned, so that the default twin keeps kubebuilder's
	// default (off).
	tuned, warmup bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	// controller-runtime's own --kubeconfig, read by ctrl.GetConfig: the
	// flag, then KUBECONFIG, in-cluster, ~/.kube/config.
	fs.AddGoFlag(flag.CommandLine.Lookup(kubeconfig.KubeconfigFlagName))
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 20, "Queries per second to the API server, sustained.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 30, "Queries to the API server allowed in a burst above --kube-api-qps.")
	fs.DurationVar(&o.kubeAPITimeout, "kube-api-timeout", 0, "Timeout of each API request; 0 means none.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables them.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoints; empty or 0 disables them.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS to callers that pass a TokenReview and a SubjectAccessReview.")
	fs.IntVar(&o.webhookPort, "webhook-port", 0, "Accepted for handroll's command line; only 0: the twin serves no webhooks.")
	fs.StringSliceVar(&o.namespaces, "namespaces", nil, "Namespaces to watch, comma-separated; empty watches all.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Hour, "How often the informers resync every cached object; 0 disables resyncs.")
	fs.DurationVar(&o.firstStatusGrace, "first-status-grace", webapp.DefaultFirstStatusGrace, "How long after its creation a new WebApp's first status may wait while it would only say the rollout is under way; 0: written at once.")
	fs.DurationVar(&o.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "How long the informers may take to list everything before start-up fails.")
	fs.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long a graceful stop may take before the process exits anyway.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "WebApps reconciled in parallel.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "", "Namespace of the operator's own objects: the Lease (unless --leader-elect-resource-namespace says otherwise) and the webapp-directory ConfigMap. Empty: the pod's own namespace, else "+leader.FallbackNamespace+".")
	o.leader.AddFlags(fs)
	fs.BoolVar(&o.tuned, "tuned", false, "Also turn on the controller-runtime options that match the rest of handroll's design: the user's ConfigMaps cached as metadata only (their data read live), the typed ConfigMap cache filtered by label, kubectl's last-applied annotation stripped with managedFields, every controller warmed up before the Lease is won (unless --"+leader.FlagWarmStandby+" is given), no gzip asked of the API server.")

	// klog's -v and --vmodule, as cmd/handroll; controller-runtime logs through klog.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := pflag.PFlagFromGoFlag(klogFlags.Lookup(name))
		if name == "v" {
			f.Shorthand = "v"
		}
		fs.AddFlag(f)
	}
}

func (o *options) validate() error {
	errs := []error{o.leader.Validate()}
	if o.webhookPort != 0 {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: the twin serves no webhooks; only 0 is accepted", o.webhookPort))
	}
	return errors.Join(errs...)
}

func main() {
	fs := pflag.NewFlagSet("handroll-twin", pflag.ContinueOnError)
	o := options{leader: leader.DefaultOptions()}
	o.addFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "handroll-twin: %v\n", err)
		os.Exit(2)
	}
	o.warmup = o.tuned
	if fs.Changed(leader.FlagWarmStandby) {
		o.warmup = o.leader.WarmStandby
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "handroll-twin: %v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(klog.NewKlogr())
	if err := run(o); err != nil {
		klog.ErrorS(err, "handroll-twin stopped with an error")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("handroll-twin stopped")
	klog.Flush()
}

func run(o options) error {
	cfg, leaderCfg, err := restConfigs(o)
	if err != nil {
		return err
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}

	// As cmd/handroll's resolveNamespaces: the pod's namespace, which the
	// Lease follows.
	if o.operatorNamespace == "" {
		o.operatorNamespace = leader.DefaultNamespace()
	}

	opts := o.managerOptions(s, leaderCfg)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	refs, err := o.refMetadataCache(cfg, s, mgr, opts.Cache)
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// The informers the controllers read, made here so that /readyz can
	// wait for each one (see informersSynced).
	// The WebApps' runs on every replica (IndexField made it before
	// mgr.Start); the others are the controllers', counted as handroll
	// counts its caches: always on a warm standby or without leader
	// election, on a cold standby once it leads, when its controllers make
	// them anyway.
	watched := []watchedKind{
		{"WebApps", mgr.GetCache(), &handrollv1.WebApp{}, true},
		{"Deployments", mgr.GetCache(), &appsv1.Deployment{}, false},
		{"Services", mgr.GetCache(), &corev1.Service{}, false},
		{"ConfigMaps", mgr.GetCache(), &corev1.ConfigMap{}, false},
	}
	if refs != nil {
		watched = append(watched, watchedKind{"ConfigMaps' metadata", refs, configMapMetadata(), false})
	}
	controllersRun := func() bool { return o.warmup || !o.leader.Enabled || isClosed(mgr.Elected()) }
	if err := mgr.AddReadyzCheck("informer-sync", informersSynced(watched, controllersRun)); err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	r := &WebAppReconciler{
		Client:             client.WithFieldOwner(mgr.GetClient(), webapp.FieldManager),
		APIReader:          mgr.GetAPIReader(),
		Recorder:           mgr.GetEventRecorder("handroll"),
		RefMetadata:        refs,
		ConfigMapsFiltered: o.tuned,
		Progress:           &webapp.ProgressWrites{Interval: webapp.DefaultProgressWriteInterval, FirstGrace: o.firstStatusGrace},
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	// The directory's own controller, on the same manager and cache.
	directory := &DirectoryReconciler{
		Client:     client.WithFieldOwner(mgr.GetClient(), webapp.FieldManager),
		Namespace:  o.operatorNamespace,
		Namespaces: o.namespaces,
	}
	if err := directory.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// restConfigs loads the rest.Config with the client flags' limits, and the
// copy leader election uses.
func restConfigs(o options) (cfg, leaderCfg *rest.Config, err error) {
	cfg, err = ctrl.GetConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = o.kubeAPIQPS, o.kubeAPIBurst, o.kubeAPITimeout
	// One bucket for the process, as handroll has: controller-runtime's
	// client otherwise builds a REST client, and so a token bucket, per
	// resource type, which multiplies the rate the flags name. Leader
	// election gets a bucket of its own, as in handroll: renewals must not
	// queue behind reconciles (the Manager would copy the shared one).
	if o.kubeAPIQPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.kubeAPIQPS, o.kubeAPIBurst)
	}
	// handroll asks for no gzip (--kube-api-compression=false); a scaffolded
	// operator takes client-go's default, and the API server gzips its
	// watch streams.
	if o.tuned {
		cfg.DisableCompression = true
	}
	leaderCfg = rest.CopyConfig(cfg)
	leaderCfg.RateLimiter = nil
	return cfg, leaderCfg, nil
}

// managerOptions are the options ctrl.NewManager builds every piece from:
// the cache, the controllers, leader election and the servers.
func (o *options) managerOptions(s *runtime.Scheme, leaderCfg *rest.Config) ctrl.Options {
	// Deployments and Services are cached only when labelled as ours;
	// ConfigMaps whole, because a spec.configMapRef names one of the
	// user's, unless --tuned moves those to a metadata-only cache of their
	// own (refMetadataCache) and the typed ConfigMaps are filtered too. The
	// directory lives in the operator's namespace: when --namespaces leaves
	// it out, its labelled ConfigMaps are cached too.
	ours := labels.SelectorFromSet(labels.Set{webapp.LabelManagedBy: webapp.ManagedBy})
	var namespaces map[string]cache.Config
	configMaps := cache.ByObject{}
	transform := cache.TransformStripManagedFields()
	// With warm-up every controller starts its sources, and so its
	// informers, on a standby, as handroll's warm standby fills its caches;
	// without it a standby holds only the informers made before mgr.Start
	// (the WebApps', by IndexField).
	controllers := config.Controller{
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		CacheSyncTimeout:        o.cacheSyncTimeout,
		EnableWarmup:            &o.warmup,
	}
	if o.tuned {
		configMaps.Label = ours
		// kubectl's last-applied annotation repeats the whole object, data
		// included: handroll's transform drops it with managedFields.
		transform = handrollcache.StripForCache
	}
	if len(o.namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range o.namespaces {
			namespaces[ns] = cache.Config{}
		}
		if _, ok := namespaces[o.operatorNamespace]; !ok {
			configMaps.Namespaces = maps.Clone(namespaces)
			configMaps.Namespaces[o.operatorNamespace] = cache.Config{LabelSelector: ours}
		}
	}
	leaseNamespace := o.leader.LeaseNamespace
	if leaseNamespace == "" {
		leaseNamespace = o.operatorNamespace
	}
	metrics := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	return ctrl.Options{
		Scheme: s,
		Cache: cache.Options{
			DefaultNamespaces: namespaces,
			ByObject: map[client.Object]cache.ByObject{
				&appsv1.Deployment{}: {Label: ours},
				&corev1.Service{}:    {Label: ours},
				&corev1.ConfigMap{}:  configMaps,
			},
			DefaultTransform: transform,
			SyncPeriod:       &o.syncPeriod,
		},
		LeaderElection:                o.leader.Enabled,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionConfig:          leaderCfg,
		LeaderElectionID:              o.leader.LeaseName,
		LeaderElectionNamespace:       leaseNamespace,
		LeaderElectionReleaseOnCancel: o.leader.ReleaseOnCancel,
		LeaseDuration:                 &o.leader.LeaseDuration,
		RenewDeadline:                 &o.leader.RenewDeadline,
		RetryPeriod:                   &o.leader.RetryPeriod,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.healthAddr,
		PprofBindAddress:              o.pprofAddr,
		GracefulShutdownTimeout:       &o.shutdownTimeout,
		Controller:                    controllers,
	}
}

// refMetadataCache is, with --tuned, the user's ConfigMaps as metadata
// only, every one in the watched namespaces, with the namespaces and
// transform of the manager's cache (managed): not builder.WatchesMetadata,
// whose informer would live in the manager's cache, where ByObject (one
// entry per GVK, typed and metadata alike) applies the ConfigMap label
// filter of managerOptions. Without --tuned it is nil.
func (o *options) refMetadataCache(cfg *rest.Config, s *runtime.Scheme, mgr ctrl.Manager, managed cache.Options) (refs cache.Cache, err error) {
	if o.tuned {
		refs, err = cache.New(cfg, cache.Options{
			HTTPClient:        mgr.GetHTTPClient(),
			Scheme:            s,
			Mapper:            mgr.GetRESTMapper(),
			DefaultNamespaces: managed.DefaultNamespaces,
			DefaultTransform:  managed.DefaultTransform,
			SyncPeriod:        &o.syncPeriod,
		})
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(managerCache{refs}); err != nil {
			return nil, err
		}
	}
	return refs, nil
}

// managerCache makes the manager treat a cache of ours as its own (the
// runnables group matches GetCache, as for a cluster): started and synced
// before the election, stopped last. Added bare, it would not be waited for
// and, with --namespaces (a multi-namespace cache, no NeedLeaderElection),
// would start only on leading.
type managerCache struct{ cache.Cache }

func (c managerCache) GetCache() cache.Cache { return c.Cache }

// watchedKind is one informer the controllers read, and its cache.
type watchedKind struct {
	name   string
	cache  cache.Cache
	obj    client.Object
	always bool // runs on every replica, not only where the controllers run
}

// informersSynced is /readyz's informer-sync check: every informer the
// controllers read has synced. A cache's WaitForCacheSync is not enough:
// it waits for the informers that exist when it is asked, and before the
// controllers start their sources that is the WebApps' alone (IndexField
// made it), so /readyz would pass while the children's caches still fill.
// GetInformer makes a missing informer (the one the controller will use)
// without waiting for it.
func informersSynced(watched []watchedKind, controllersRun func() bool) healthz.Checker {
	return func(req *http.Request) error {
		all := controllersRun()
		var unsynced []string
		for _, w := range watched {
			if !all && !w.always {
				continue
			}
			inf, err := w.cache.GetInformer(req.Context(), w.obj, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !inf.HasSynced() {
				unsynced = append(unsynced, w.name)
			}
		}
		if len(unsynced) > 0 {
			return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
		}
		return nil
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
