package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/leader"
)

// options are the command-line flags. Their names follow the kube-* binaries
// and controller-runtime's manager.Options, so that an operator of either
// finds them where expected.
type options struct {
	kubeconfig     string
	kubeAPIQPS     float32
	kubeAPIBurst   int
	kubeAPITimeout time.Duration
	kubeAPIGzip    bool

	metricsAddr      string
	healthAddr       string
	pprofAddr        string
	metricsSecure    bool
	metricsCertDir   string
	metricsCA        metricsCAOptions
	webhookPort      int
	webhookCertDir   string
	webhookURL       string
	webhookCerts     webhookCertOptions
	cacheSyncTimeout time.Duration
	shutdownTimeout  time.Duration
	syncPeriod       time.Duration
	firstStatusGrace time.Duration
	namespaces       []string

	maxConcurrentReconciles int
	operatorNamespace       string
	reconcileJournal        string
	shards                  int
	reconcileJournalMaxMiB  int64
	leader                  leader.Options
	logs                    *logsapi.LoggingConfiguration

	showVersion bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path to a kubeconfig file. Empty: the KUBECONFIG environment variable, then the in-cluster configuration, then ~/.kube/config.")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 20, "Queries per second to the API server, sustained.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 30, "Queries to the API server allowed in a burst above --kube-api-qps.")
	fs.DurationVar(&o.kubeAPITimeout, "kube-api-timeout", 0, "Timeout of each API request; 0 means none (client-go's default).")
	fs.BoolVar(&o.kubeAPIGzip, "kube-api-compression", false, "Ask the API server to gzip its large responses and watch streams. Off, as in kube-controller-manager and kube-scheduler: next to the API server, compressing costs both sides more CPU than it saves in time; turn it on over a slow link. A kubeconfig's disable-compression: true wins.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "Address of /healthz, /livez and /readyz; 0 disables them.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS (a self-signed certificate unless --metrics-cert-dir or --metrics-ca-configmap) and allow only callers whose bearer token passes a TokenReview and whom RBAC allows to get the /metrics URL.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory holding the metrics server's tls.crt and tls.key (as cert-manager mounts them), reloaded when they change, so that scrapers can verify it; needs --metrics-secure. Empty: a self-signed certificate made in memory, unless --metrics-ca-configmap.")
	fs.StringVar(&o.metricsCA.configMap, "metrics-ca-configmap", "", "ConfigMap in --operator-namespace into which the self-managed CA bundle is published (key ca.crt) and kept current through CA rotations; the metrics server's certificate is then signed by that CA for the DNS names of --metrics-service-name, so that scrapers can verify it with the ConfigMap alone. Needs --metrics-secure and the self-managed webhook certificates. Empty: neither.")
	fs.StringVar(&o.metricsCA.serviceName, "metrics-service-name", "handroll-metrics", "Service in --operator-namespace in front of /metrics; its DNS names are in the metrics certificate that --metrics-ca-configmap has signed.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the HTTPS admission webhook server; 0 disables it.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory holding the webhook's tls.crt and tls.key (as cert-manager mounts them), reloaded when they change. Empty: handroll makes, shares and rotates its own certificates (see --webhook-secret-name).")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "URL at which the API server reaches this process's webhooks, such as https://127.0.0.1:9443 when running outside the cluster; the webhook configurations and the CRD's conversion webhook are pointed at it. Empty: they call the webhook Service.")
	fs.StringVar(&o.webhookCerts.secretName, "webhook-secret-name", "handroll-webhook-tls", "Secret in --operator-namespace holding the self-managed CA and serving certificate, shared by all replicas.")
	fs.StringVar(&o.webhookCerts.serviceName, "webhook-service-name", "handroll-webhook", "Service in --operator-namespace in front of the webhooks; its DNS names are in the serving certificate, and --conversion-crd's conversion calls it.")
	fs.IntVar(&o.webhookCerts.servicePort, "webhook-service-port", certs.DefaultServicePort, "Port of --webhook-service-name that leads to --webhook-port; --conversion-crd's conversion calls it.")
	fs.StringVar(&o.webhookCerts.configurationName, "webhook-configuration-name", "handroll", "Name of the MutatingWebhookConfiguration and ValidatingWebhookConfiguration that get the CA bundle (and --webhook-url); empty: none.")
	fs.StringVar(&o.webhookCerts.conversionCRD, "conversion-crd", "webapps.handroll.dev", "CRD whose conversion webhook gets the CA bundle and calls this operator: --webhook-url, else --webhook-service-name in --operator-namespace at --webhook-service-port (so a CRD applied apart from the operator works in any namespace); empty: none.")
	fs.DurationVar(&o.webhookCerts.validity, "webhook-cert-validity", 90*24*time.Hour, "Lifetime of a self-managed serving certificate; it is renewed after two thirds of it, and its CA lives four times as long.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoints (/debug/pprof/); empty or 0 disables them.")
	fs.DurationVar(&o.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "How long the informers may take to list everything before start-up fails.")
	fs.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long a graceful stop may take before the process exits anyway.")
	fs.StringSliceVar(&o.namespaces, "namespaces", nil, "Namespaces to watch, comma-separated; empty watches all (cache.Options.DefaultNamespaces).")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Hour, "How often the informers resync every cached object (cache.Options.SyncPeriod); 0 disables resyncs.")
	fs.DurationVar(&o.firstStatusGrace, "first-status-grace", webapp.DefaultFirstStatusGrace, "How long after its creation a new WebApp's first status may wait while it would only say the rollout is under way, so that a rollout done by then costs one status write; 0: written at once.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "WebApps reconciled in parallel (controller.Options.MaxConcurrentReconciles).")
	fs.IntVar(&o.shards, "shards", 0,
		"Split the WebApps between the replicas: the hash space of their uids is cut into this many ranges (at most 256), each fenced by a Lease and reconciled by one live replica, which caches only its ranges' WebApps and children (labelled handroll.dev/shard-bucket) with the API server's ShardedListAndWatch feature gate (else everything, filtered on the client). 0: one leader reconciles every WebApp.")
	fs.StringVar(&o.reconcileJournal, "reconcile-journal", "",
		"File to which every reconcile's start and end are appended as JSON lines, with this replica's leader election identity: an audit of who reconciled what, when. Empty: none.")
	fs.Int64Var(&o.reconcileJournalMaxMiB, "reconcile-journal-max-size", 100,
		"Size in MiB at which the reconcile journal is rotated: FILE becomes FILE.1, replacing the previous one, and a new FILE begins. 0: no cap.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "",
		"Namespace of the operator's own objects: the Lease (unless --leader-elect-resource-namespace says otherwise), the webapp-directory ConfigMap, the certificate Secret and the webhook Service its DNS names name. Empty: the pod's own namespace (the service account's namespace file, then $POD_NAMESPACE), else "+leader.FallbackNamespace+".")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and Go build information, then exit.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and runs the operator; it returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "uninstall" {
		return runUninstall(args[1:], stdout, stderr)
	}
	// Step 1 — flags.
	fs := pflag.NewFlagSet("handroll", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "handroll runs the WebApp operator (group handroll.dev).\n\nUsage:\n  handroll [flags]\n  handroll uninstall [flags]   (handroll uninstall --help)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	o := options{leader: leader.DefaultOptions(), logs: logsapi.NewLoggingConfiguration()}
	o.addFlags(fs)
	o.leader.AddFlags(fs)
	// The logging flags of kube-controller-manager: --logging-format, -v,
	// --vmodule, --log-flush-frequency and the format options; klog's
	// file-output flags stay out (log to stderr, as a container wants).
	logsapi.AddFlags(o.logs, fs)
	// --feature-gates, for the logging gates only (LoggingAlphaOptions,
	// LoggingBetaOptions), as kube-controller-manager has them: without it
	// the [Alpha] format options above could never be turned on.
	gates := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gates); err != nil {
		fmt.Fprintf(stderr, "handroll: %v\n", err)
		return 1
	}
	gates.AddFlag(fs)
	// kube binaries accept --log_flush_frequency and --log-flush-frequency alike.
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "handroll: %v\nRun 'handroll --help' for the flags.\n", err)
		return 2
	}
	// A Service name is used only with the CA's certificate: given without
	// it, the start is refused rather than the name ignored.
	o.metricsCA.serviceNameSet = fs.Changed("metrics-service-name")
	if o.showVersion {
		printVersion(stdout)
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "handroll: unexpected arguments %q\n", fs.Args())
		return 2
	}
	// Before anything logs: the format applies to every line. Validate first
	// so that each error names its flag rather than a config field.
	if errs := logsapi.Validate(o.logs, gates, nil); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(stderr, "handroll: %s: %s\n", logFlag(e.Field), e.ErrorBody())
		}
		return 2
	}
	// Applying also makes klog slog's default, and so the log package's.
	// Its streams pass through gate, which ends them on an error exit.
	gate := &exitGate{}
	streams := &logsapi.LoggingOptions{ErrorStream: gate.writer(os.Stderr), InfoStream: gate.writer(os.Stdout)}
	if err := logsapi.ValidateAndApplyWithOptions(o.logs, streams, gates); err != nil {
		fmt.Fprintf(stderr, "handroll: logging: %v\n", err)
		return 2
	}

	// Step 2 — signals (signals.SetupSignalHandler): the first SIGINT or
	// SIGTERM cancels ctx and starts a graceful stop; a second exits at once.
	ctx, stop := signalContext()
	defer stop()

	if err := start(ctx, o); err != nil {
		// The reason is the last line, though goroutines not waited for
		// (the controllers of a range whose Lease was lost) still log.
		klog.Flush()
		gate.lastLine(stoppedWithAnError)
		klog.ErrorS(err, stoppedWithAnError)
		klog.Flush()
		return 1
	}
	klog.InfoS("handroll stopped")
	klog.Flush()
	return 0
}

const stoppedWithAnError = "handroll stopped with an error"

// exitGate passes the log streams through until lastLine: from then on it
// passes only the first write holding that line's message, then nothing.
type exitGate struct {
	mu     sync.Mutex
	last   []byte // the awaited message, once lastLine is called
	closed bool
}

func (g *exitGate) lastLine(msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = []byte(msg)
}

func (g *exitGate) writer(w io.Writer) io.Writer {
	return gatedWriter{g: g, w: w}
}

type gatedWriter struct {
	g *exitGate
	w io.Writer
}

func (gw gatedWriter) Write(p []byte) (int, error) {
	g := gw.g
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return len(p), nil
	case g.last == nil:
		return gw.w.Write(p)
	case bytes.Contains(p, g.last):
		g.closed = true
		return gw.w.Write(p)
	}
	return len(p), nil
}

// logFlag names the flag that sets field of LoggingConfiguration, as
// Validate reports it (such as "format" or "vmodule[0]").
func logFlag(field string) string {
	for prefix, flag := range map[string]string{
		"format": "--logging-format", "flushFrequency": "--log-flush-frequency",
		"verbosity": "-v", "vmodule": "--vmodule",
		"options.text.splitStream": "--log-text-split-stream", "options.text.infoBufferSize": "--log-text-info-buffer-size",
		"options.json.splitStream": "--log-json-split-stream", "options.json.infoBufferSize": "--log-json-info-buffer-size",
	} {
		if field == prefix || strings.HasPrefix(field, prefix+"[") {
			return flag
		}
	}
	return field
}
