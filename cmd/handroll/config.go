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

func findConfig(kubeconfig string) (*rest.Config, string, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, "", fmt.Errorf("--kubeconfig=%s: %w", kubeconfig, err)
		}
		return cfg, "--kubeconfig " + kubeconfig, nil
	}
	var tried []string
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		// KUBECONFIG may list several files, merged as kubectl merges them.
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err == nil {
			return cfg, "KUBECONFIG " + env, nil
		}
		tried = append(tried, fmt.Sprintf("KUBECONFIG=%s: %v", env, err))
	} else {
		tried = append(tried, "KUBECONFIG: not set")
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, "in-cluster service account", nil
	}
	tried = append(tried, "in-cluster: "+err.Error())
	if home, herr := os.UserHomeDir(); herr == nil {
		path := filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
		if _, serr := os.Stat(path); serr == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err == nil {
				return cfg, path, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", path, err))
		} else {
			tried = append(tried, fmt.Sprintf("%s: %v", path, serr))
		}
	}
	return nil, "", errors.New("no Kubernetes configuration found; tried --kubeconfig (not set), " + strings.Join(tried, "; "))
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
