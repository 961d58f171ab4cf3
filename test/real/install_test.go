package real

import (
	"path/filepath"
	"testing"
)

// TestInstallPathsOnTheLocalCluster: each install path the README gives
// applies on the local cluster it also gives, as make cluster-up leaves
// it, and again after make install (the CRD alone, for a local run, or
// first on an upgrade). Applied with --dry-run=server, which detects
// server-side apply's conflicts as the apply would and starts no pod of
// manifests/default's image, which the real node cannot pull; the other
// tests install each path for real (make deploy, the installer, helm).
func TestInstallPathsOnTheLocalCluster(t *testing.T) {
	makeTarget(t, "cluster-up", "REAL_NODE=true")
	checkNoCRD(t)
	installer := filepath.Join(root, ".local", "test-real", "install-default.yaml")
	makeTarget(t, "build-installer", "IMG="+firstImage, "INSTALLER="+installer)
	paths := map[string][]string{
		"kubectl apply --server-side -k manifests/default": {"apply", "--server-side", "--dry-run=server", "-k", filepath.Join(root, "manifests", "default")},
		"kubectl apply --server-side -f install.yaml":      {"apply", "--server-side", "--dry-run=server", "-f", installer},
	}
	for name, args := range paths {
		t.Run(name+" on the cluster as make cluster-up leaves it", func(t *testing.T) { kubectl(t, args...) })
	}
	makeTarget(t, "install")
	t.Cleanup(func() { makeTarget(t, "uninstall") })
	for name, args := range paths {
		t.Run(name+" after make install", func(t *testing.T) { kubectl(t, args...) })
	}
	got := kubectl(t, "get", "crd", "webapps.handroll.dev", "-o", "jsonpath={.spec.conversion.webhook.clientConfig.service.namespace}")
	if got != operatorNamespace {
		t.Errorf("make install points the CRD's conversion at the namespace %q, not %q, where manifests/default installs the webhook Service", got, operatorNamespace)
	}
}

// checkNoCRD fails t if the cluster has the WebApp CRD: an install path
// would have to adopt it, and helm refuses to.
func checkNoCRD(t *testing.T) {
	t.Helper()
	managers := kubectl(t, "get", "crd", "webapps.handroll.dev", "--ignore-not-found", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if managers != "" {
		t.Fatalf("the local cluster has the WebApp CRD before any install (managers %s): an install would have to adopt it", managers)
	}
}
