package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/leader"
)

// loadConfig finds the cluster to talk to, in the order of
// ctrl.GetConfigOrDie: the --kubeconfig flag, the KUBECONFIG environment
// variable, the in-cluster service account, then ~/.kube/config. When none
// works, the error names every place it tried.
func loadConfig(kubeconfig string, qps float32, burst int, timeout time.Duration) (*rest.Config, string, error) {
	cfg, source, err := findConfig(kubeconfig)
	if err != nil {
		return nil, "", err
	}
	// client-go's defaults (5 QPS, burst 10) throttle an operator that
	// reconciles hundreds of objects; the flags set ours. They are the whole
	// process's budget: one token bucket shared by every client made from
	// cfg. Without it client-go gives each clientset a bucket of its own
	// (and controller-runtime's client one per resource type), so the same
	// flags would allow a multiple of the rate they name. Leader election
	// and events copy cfg and take buckets of their own (pkg/leader,
	// start.go step 7): neither may wait behind the reconciles.
	cfg.QPS = qps
	cfg.Burst = burst
	if qps > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	cfg.Timeout = timeout
	cfg.UserAgent = "handroll/" + version
	cfg.WarningHandler = &onceWarnings{}
	return cfg, source, nil
}

// withCompression sets whether cfg's clients ask for gzipped answers
// (--kube-api-compression). The API server gzips a list or a watch-list
// stream, which an informer's watch is from its start to its end, for any
// client that asks: both ends then spend CPU on every event, which on a
// fast link costs more time than it saves. A kubeconfig that disables
// compression is obeyed either way.
func withCompression(cfg *rest.Config, on bool) {
	cfg.DisableCompression = cfg.DisableCompression || !on
}

func findConfig(kubeconfig string) (*rest.Config, string, error) {
	home := ""
	if dir, err := os.UserHomeDir(); err == nil {
		home = filepath.Join(dir, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	}
	return configSources{
		kubeconfigEnv: os.Getenv(clientcmd.RecommendedConfigPathEnvVar),
		inCluster:     rest.InClusterConfig,
		home:          home,
	}.find(kubeconfig)
}

// configSources are the places findConfig looks, other than the flag; tests
// replace them (the in-cluster one needs a service-account token file).
type configSources struct {
	kubeconfigEnv string                       // $KUBECONFIG, a list of files
	inCluster     func() (*rest.Config, error) // rest.InClusterConfig
	home          string                       // ~/.kube/config; empty if there is no home
}

// find returns the first configuration that is chosen. The flag and
// KUBECONFIG are explicit choices: when one is set, it is used or its error
// returned, never silently replaced by another cluster's configuration.
func (s configSources) find(kubeconfig string) (*rest.Config, string, error) {
	if kubeconfig != "" {
		cfg, err := loadKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig})
		if err != nil {
			return nil, "", fmt.Errorf("--kubeconfig=%s: %w", kubeconfig, err)
		}
		return cfg, "--kubeconfig " + kubeconfig, nil
	}
	if env := s.kubeconfigEnv; env != "" {
		// KUBECONFIG may list several files, merged as kubectl merges them
		// (a missing one is skipped, as kubectl does; none usable is an error).
		cfg, err := loadKubeconfig(&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)})
		if err != nil {
			return nil, "", fmt.Errorf("KUBECONFIG=%s: %w", env, err)
		}
		return cfg, "KUBECONFIG " + env, nil
	}
	tried := []string{"--kubeconfig: not set", "KUBECONFIG: not set"}
	cfg, err := s.inCluster()
	if err == nil {
		return cfg, inClusterSource, nil
	}
	tried = append(tried, "in-cluster: "+err.Error())
	if s.home != "" {
		if _, serr := os.Stat(s.home); serr == nil {
			cfg, err := loadKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: s.home})
			if err == nil {
				return cfg, s.home, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", s.home, err))
		} else {
			tried = append(tried, fmt.Sprintf("%s: %v", s.home, serr))
		}
	}
	return nil, "", errors.New("no Kubernetes configuration found; tried " + strings.Join(tried, "; "))
}

// inClusterSource is the source findConfig names for the in-cluster
// configuration: the process runs in a pod.
const inClusterSource = "in-cluster service account"

// resolveNamespaces fills the namespaces left empty: the operator's own is
// the pod's (leader.DefaultNamespace), so that an install moved to another
// namespace by kustomize needs no flag; the Lease follows it unless
// --leader-elect-resource-namespace names another.
func resolveNamespaces(o options) options {
	if o.operatorNamespace == "" {
		o.operatorNamespace = leader.DefaultNamespace()
	}
	if o.leader.LeaseNamespace == "" {
		o.leader.LeaseNamespace = o.operatorNamespace
	}
	return o
}

// localWebhooks turns the webhooks off for a process outside the cluster
// that was not told where the API server can call it (--webhook-url). The
// self-managed certificates would otherwise write the cluster's webhook
// configurations and the CRD's conversion, which the cluster's own
// replicas serve: a local run on a shared cluster must leave them alone.
// Certificates from files (--webhook-cert-dir) touch nothing in the
// cluster, so they keep the server on.
func localWebhooks(o options, inCluster bool) options {
	if inCluster || o.webhookURL != "" || o.webhookCertDir != "" || o.webhookPort == 0 {
		return o
	}
	klog.InfoS("Not serving the webhooks: running outside the cluster without --webhook-url; the cluster's webhook configurations and the CRD's conversion are left as they are",
		"optIn", "--webhook-url=https://<address the API server reaches>:"+fmt.Sprint(o.webhookPort))
	o.webhookPort = 0
	return o
}

// loadKubeconfig loads and merges the files rules name, as kubectl does.
// Not clientcmd.BuildConfigFromFlags or a DeferredLoadingClientConfig:
// given files that hold no usable configuration (empty, no current
// context), those fall back to the in-cluster configuration, which is
// another cluster than the one the user chose.
func loadKubeconfig(rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	raw, err := rules.Load()
	if err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveClientConfig(*raw, "", &clientcmd.ConfigOverrides{}, rules).ClientConfig()
}

// onceWarnings logs each distinct API warning (a deprecated API, an unknown
// field) once, rather than on every request that triggers it.
type onceWarnings struct{ seen sync.Map }

func (o *onceWarnings) HandleWarningHeader(code int, agent, message string) {
	if code != 299 || message == "" {
		return
	}
	if _, dup := o.seen.LoadOrStore(message, struct{}{}); !dup {
		klog.InfoS("API server warning", "warning", message)
	}
}

// validateFirstStatusGrace refuses a negative --first-status-grace, which
// would hold nothing and read as a mistake.
func validateFirstStatusGrace(o options) error {
	if o.firstStatusGrace < 0 {
		return fmt.Errorf("--first-status-grace=%s: must be 0 (no wait) or positive", o.firstStatusGrace)
	}
	return nil
}
