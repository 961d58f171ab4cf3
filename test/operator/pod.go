package operator

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// ServiceAccountDir is where a pod's service account is mounted, and where
// the in-cluster configuration and the pod's namespace are read from.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// LaunchInPod runs handroll as a pod's container does: no --kubeconfig, the
// API server from KUBERNETES_SERVICE_HOST and _PORT, its CA, a token of
// cfg's and the pod's namespace from files at ServiceAccountDir. The
// process gets a mount namespace of its own in which a tmpfs over /run
// holds those files, so nothing of the machine's changes; that needs root
// and unshare(1), and the test is skipped without them. args are added as
// in Launch, webhooks included: in a pod, handroll serves them behind the
// Service and manages their certificates.
func LaunchInPod(t testing.TB, cfg *rest.Config, namespace string, args ...string) *Operator {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("running handroll as in a pod needs root and unshare(1) for a mount namespace of its own")
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || cfg.BearerToken == "" || len(cfg.CAData) == 0 {
		t.Fatalf("the in-cluster configuration needs an https host, a bearer token and CA data; have %q: %v", cfg.Host, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	sa := t.TempDir()
	for name, data := range map[string][]byte{
		"token": []byte(cfg.BearerToken), "ca.crt": cfg.CAData, "namespace": []byte(namespace),
	} {
		if err := os.WriteFile(filepath.Join(sa, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := Binary(t)
	// /var/run is /run; the script's "$@" is handroll's command line.
	const script = `set -e
mount -t tmpfs handroll-pod /run
mkdir -p ` + ServiceAccountDir + `
mount --bind "$SA_DIR" ` + ServiceAccountDir + `
exec "$@"`
	return launch(t, func(o *Operator) *exec.Cmd {
		argv := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", bin}, o.flags()...)
		cmd := exec.Command(unshare, append(argv, args...)...)
		cmd.Env = append(os.Environ(), "SA_DIR="+sa, "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port,
			"KUBECONFIG=")
		return cmd
	})
}
