package chart

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/handroll/handroll/test/controlplane"
)

// TestShardsChangeIsRefusedWhileReplicasRun: replicas of two splits
// (--shards) wait for each other, so a rolling update that changes
// manager.shards would reconcile nothing until the old replicas are gone.
// helm upgrade refuses it while the live Deployment has replicas, saying
// the procedure; the procedure's steps pass; helm template, which cannot
// look, renders any count.
func TestShardsChangeIsRefusedWhileReplicasRun(t *testing.T) {
	const ns = "sharded-ops"
	helmPath(t)
	cp := controlplane.StartForTest(t, controlplane.Options{})
	kube := cp.KubeClient(t)
	args := func(t *testing.T) []string {
		t.Helper()
		d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "handroll", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}

	mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--create-namespace", "--set", "manager.shards=2")
	for _, set := range []string{"manager.shards=3", "manager.shards=0", "manager.shards=3,manager.replicas=3"} {
		out, err := helmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--reuse-values", "--set", set)
		if err == nil {
			t.Fatalf("helm upgrade --set %s with 2 replicas of --shards=2 running succeeded:\n%s", set, out)
		}
		if set == "manager.shards=3" {
			t.Logf("helm upgrade --set %s:\n%s", set, out)
		}
		for _, want := range []string{"manager.shards", "--shards=2", "--set manager.replicas=0", "kubectl -n " + ns + " get pods -l app.kubernetes.io/name=handroll", "docs/sharding.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("helm upgrade --set %s: the refusal does not say %q:\n%s", set, want, out)
			}
		}
	}
	if !slices.Contains(args(t), "--shards=2") {
		t.Errorf("a refused upgrade changed the Deployment: args %v", args(t))
	}
	// The same split: any other change goes through.
	mustHelmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--reuse-values", "--set", "manager.shards=2,manager.logging.verbosity=2")
	// helm template cannot look up the live Deployment: GitOps follows the
	// procedure in its own commits (docs/sharding.md).
	if _, err := template(t, ns, "--set", "manager.shards=5"); err != nil {
		t.Errorf("helm template with another manager.shards: %v", err)
	}

	// The procedure: no replica first, then the new split.
	mustHelmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--reuse-values", "--set", "manager.replicas=0")
	mustHelmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--reuse-values", "--set", "manager.replicas=2,manager.shards=3")
	if !slices.Contains(args(t), "--shards=3") {
		t.Errorf("after the procedure: args %v, want --shards=3", args(t))
	}
}
