package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(dir, strings.NewReplacer(":", "_", "/", "_").Replace(server))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigOrder(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	flagFile := writeKubeconfig(t, dir, "https://flag.example:6443")
	envFile := writeKubeconfig(t, dir, "https://env.example:6443")
	homeFile := writeKubeconfig(t, dir, "https://home.example:6443")
	if err := os.Rename(homeFile, filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	cases := []struct {
		name, flag, env, want string
	}{
		{"the flag wins", flagFile, envFile, "https://flag.example:6443"},
		{"then KUBECONFIG", "", envFile, "https://env.example:6443"},
		{"then the home directory", "", "", "https://home.example:6443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			cfg, _, err := loadConfig(tc.flag, 7, 11, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.want {
				t.Errorf("host %q, want %q", cfg.Host, tc.want)
			}
			if cfg.QPS != 7 || cfg.Burst != 11 || cfg.Timeout != 3*time.Second {
				t.Errorf("qps %v burst %d timeout %s: the flags were not applied", cfg.QPS, cfg.Burst, cfg.Timeout)
			}
			if !strings.HasPrefix(cfg.UserAgent, "handroll/") {
				t.Errorf("user agent %q", cfg.UserAgent)
			}
			if cfg.RateLimiter == nil || cfg.RateLimiter.QPS() != 7 {
				t.Errorf("rate limiter %v: want one bucket of 7 QPS shared by every client", cfg.RateLimiter)
			}
		})
	}
}

// TestOneBudgetForTheProcess: two clientsets made from the config draw on
// one bucket, so --kube-api-qps is the process's rate, not each client's.
func TestOneBudgetForTheProcess(t *testing.T) {
	path := writeKubeconfig(t, t.TempDir(), "https://one.example:6443")
	cfg, _, err := loadConfig(path, 1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := rest.RESTClientFor(withCodec(rest.CopyConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rest.RESTClientFor(withCodec(rest.CopyConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	if a.GetRateLimiter() != b.GetRateLimiter() {
		t.Error("two clients from the config have different rate limiters")
	}
	// Burst 1: after one token, the shared bucket is empty for both.
	if !a.GetRateLimiter().TryAccept() {
		t.Fatal("the first token was refused")
	}
	if b.GetRateLimiter().TryAccept() {
		t.Error("the second client took a token the first had spent: the buckets are not shared")
	}
}

func withCodec(cfg *rest.Config) *rest.Config {
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.APIPath = "/api"
	return cfg
}

func TestLoadConfigNamesWhatItTried(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, _, err := loadConfig("", 20, 30, 0)
	if err == nil {
		t.Fatal("loadConfig found a configuration where there is none")
	}
	for _, want := range []string{"--kubeconfig", "KUBECONFIG", "in-cluster", ".kube/config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}

	if _, _, err := loadConfig("/does/not/exist", 20, 30, 0); err == nil || !strings.Contains(err.Error(), "--kubeconfig=/does/not/exist") {
		t.Errorf("a missing --kubeconfig file: error %v, want one naming the flag", err)
	}
}

func TestFlags(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "handroll ") || !strings.Contains(out.String(), "go:") {
		t.Errorf("--version: code %d, output %q", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"--help"}, &out, &errOut); code != 0 {
		t.Errorf("--help: code %d", code)
	}
	for _, flag := range []string{"--kubeconfig", "-v, --v", "--kube-api-qps", "--kube-api-burst", "--kube-api-timeout", "--kube-api-compression", "--metrics-bind-address", "--health-probe-bind-address"} {
		if !strings.Contains(errOut.String(), flag) {
			t.Errorf("--help does not list %s", flag)
		}
	}
	errOut.Reset()
	if code := run([]string{"--no-such-flag"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown flag: --no-such-flag") {
		t.Errorf("an unknown flag: code %d, stderr %q", code, errOut.String())
	}
}

// TestExplicitConfigThatFailsIsAnError: a --kubeconfig or KUBECONFIG that
// names a missing, broken or empty file is an error, naming it; it never
// falls back to another source (here ~/.kube/config, another cluster).
func TestExplicitConfigThatFailsIsAnError(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(writeKubeconfig(t, dir, "https://other.example:6443"), filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	broken := filepath.Join(dir, "broken")
	if err := os.WriteFile(broken, []byte("clusters: [this is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct{ name, flag, env, want string }{
		{"flag: missing file", missing, "", "--kubeconfig"},
		{"flag: broken file", broken, "", "--kubeconfig"},
		{"flag: empty file", empty, "", "--kubeconfig"},
		{"KUBECONFIG: missing file", "", missing, "KUBECONFIG"},
		{"KUBECONFIG: broken file", "", broken, "KUBECONFIG"},
		{"KUBECONFIG: empty file", "", empty, "KUBECONFIG"},
		{"KUBECONFIG: a list of missing files", "", missing + string(filepath.ListSeparator) + missing + "2", "KUBECONFIG"},
		{"KUBECONFIG: a list with a broken file", "", broken + string(filepath.ListSeparator) + missing, "KUBECONFIG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			cfg, source, err := loadConfig(tc.flag, 20, 30, 0)
			if err == nil {
				t.Fatalf("loadConfig = %s from %q, want an error", cfg.Host, source)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// With an in-cluster configuration available, a failing explicit choice
// still fails: it is not replaced by the cluster the pod runs in.
func TestExplicitConfigNeverFallsBackToInCluster(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	good := writeKubeconfig(t, dir, "https://chosen.example:6443")
	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster.example:443"}, nil }
	for _, tc := range []struct{ name, flag, env, want string }{
		{"flag: missing file", missing, "", ""},
		{"flag: empty file", empty, "", ""},
		{"KUBECONFIG: missing file", "", missing, ""},
		{"KUBECONFIG: empty file", "", empty, ""},
		{"KUBECONFIG: a list of missing files", "", missing + string(filepath.ListSeparator) + missing + "2", ""},
		{"KUBECONFIG: a list with a good file", "", missing + string(filepath.ListSeparator) + good, "https://chosen.example:6443"},
		{"neither: in-cluster", "", "", "https://in-cluster.example:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, source, err := configSources{kubeconfigEnv: tc.env, inCluster: inCluster}.find(tc.flag)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("find = %s from %q, want an error", cfg.Host, source)
			case tc.want != "" && err != nil:
				t.Errorf("find: %v", err)
			case tc.want != "" && cfg.Host != tc.want:
				t.Errorf("host %q, want %q", cfg.Host, tc.want)
			}
		})
	}
}

// TestCompressionIsOffUnlessAsked: handroll's clients ask for no gzip
// unless --kube-api-compression says so, and a kubeconfig's
// disable-compression: true is obeyed whatever the flag.
func TestCompressionIsOffUnlessAsked(t *testing.T) {
	dir := t.TempDir()
	plain := writeKubeconfig(t, dir, "https://plain.example:6443")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://nogzip.example:6443", DisableCompression: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	nogzip := filepath.Join(dir, "nogzip")
	if err := clientcmd.WriteToFile(*cfg, nogzip); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kubeconfig string
		flag       bool
		want       bool // DisableCompression
	}{
		{plain, false, true},
		{plain, true, false},
		{nogzip, false, true},
		{nogzip, true, true},
	} {
		cfg, _, err := loadConfig(tc.kubeconfig, 20, 30, 0)
		if err != nil {
			t.Fatal(err)
		}
		withCompression(cfg, tc.flag)
		if cfg.DisableCompression != tc.want {
			t.Errorf("%s, --kube-api-compression=%v: DisableCompression %v, want %v", filepath.Base(tc.kubeconfig), tc.flag, cfg.DisableCompression, tc.want)
		}
	}
}

// TestFirstStatusGraceIsRefusedWhenNegative: the flag is named in the
// refusal; 0 and a positive grace start.
func TestFirstStatusGraceIsRefusedWhenNegative(t *testing.T) {
	for grace, refused := range map[time.Duration]bool{-time.Second: true, 0: false, 3 * time.Second: false} {
		err := validateFirstStatusGrace(options{firstStatusGrace: grace})
		if (err != nil) != refused || err != nil && !strings.Contains(err.Error(), "--first-status-grace") {
			t.Errorf("--first-status-grace=%s: %v; want refused %v, naming the flag", grace, err, refused)
		}
	}
}
