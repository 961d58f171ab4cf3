// Command handroll-twin is handroll's WebApp operator on controller-runtime:
// the same reconciler behaviour, flags and defaults, with ctrl.NewManager in
// place of everything cmd/handroll wires by hand. It serves no webhooks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
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

	"github.com/handroll/handroll/pkg/apis/scheme"
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
	cacheSyncTimeout        time.Duration
	shutdownTimeout         time.Duration
	maxConcurrentReconciles int
	operatorNamespace       string
	leader                  leader.Options
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
	fs.DurationVar(&o.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "How long the informers may take to list everything before start-up fails.")
	fs.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long a graceful stop may take before the process exits anyway.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "WebApps reconciled in parallel.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "", "Namespace of the operator's own objects: the Lease (unless --leader-elect-resource-namespace says otherwise) and the webapp-directory ConfigMap. Empty: the pod's own namespace, else "+leader.FallbackNamespace+".")
	o.leader.AddFlags(fs)

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
	if o.leader.Enabled && !o.leader.WarmStandby {
		errs = append(errs, fmt.Errorf("--%s=false: the manager always fills its caches before the election", leader.FlagWarmStandby))
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
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
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
	leaderCfg := rest.CopyConfig(cfg)
	leaderCfg.RateLimiter = nil
	s, err := scheme.New()
	if err != nil {
		return err
	}

	// As cmd/handroll's resolveNamespaces: the pod's namespace, which the
	// Lease follows.
	if o.operatorNamespace == "" {
		o.operatorNamespace = leader.DefaultNamespace()
	}

	// Deployments and Services are cached only when labelled as ours;
	// ConfigMaps whole, because a spec.configMapRef names one of the
	// user's. The directory lives in the operator's namespace: when
	// --namespaces leaves it out, its labelled ConfigMaps are cached too.
	ours := labels.SelectorFromSet(labels.Set{webapp.LabelManagedBy: webapp.ManagedBy})
	var namespaces map[string]cache.Config
	configMaps := cache.ByObject{}
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

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: s,
		Cache: cache.Options{
			DefaultNamespaces: namespaces,
			ByObject: map[client.Object]cache.ByObject{
				&appsv1.Deployment{}: {Label: ours},
				&corev1.Service{}:    {Label: ours},
				&corev1.ConfigMap{}:  configMaps,
			},
			DefaultTransform: cache.TransformStripManagedFields(),
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
		Controller: config.Controller{
			MaxConcurrentReconciles: o.maxConcurrentReconciles,
			CacheSyncTimeout:        o.cacheSyncTimeout,
		},
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informer-sync", func(req *http.Request) error {
		// WaitForCacheSync blocks until the caches sync: answer within a
		// second, as a probe expects.
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informers have not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	r := &WebAppReconciler{
		Client:    client.WithFieldOwner(mgr.GetClient(), webapp.FieldManager),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("handroll"),
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
