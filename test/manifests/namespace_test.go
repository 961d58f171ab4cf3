package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
)

// TestOneNamespace: the operator's namespace is named in one place,
// manifests/default's namespace:, and an overlay that sets only another
// namespace moves every namespaced object and every reference to one. The
// CRD's kustomization repeats it, so that the CRD applied alone (make
// install, an upgrade's first step) calls the conversion webhook where
// manifests/default puts it; an overlay overrides both.
func TestOneNamespace(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	checkNamespaceNamedOnce(t, root)

	kubectl := kubectlPath(t)
	def := kustomize(t, kubectl, "default")
	moved := kustomizePath(t, kubectl, installOverlay(t, elsewhere), "an overlay setting namespace "+elsewhere)
	if len(moved) != len(def) {
		t.Errorf("the overlay holds %d objects, manifests/default %d", len(moved), len(def))
	}
	for key, u := range moved {
		checkMovedObject(t, key, u)
	}
	// The operator is given no namespace: it takes its pod's.
	dep := get[appsv1.Deployment](t, moved, "Deployment "+elsewhere+"/handroll")
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--operator-namespace") || strings.HasPrefix(a, "--leader-elect-resource-namespace") {
				t.Errorf("container %s sets %s: the operator's namespace must follow the install's", c.Name, a)
			}
		}
	}
}

// checkNamespaceNamedOnce checks that the kustomizations of manifests/default
// and manifests/crd set the operator's namespace, and that no other
// manifest names it outside comments.
func checkNamespaceNamedOnce(t *testing.T, root string) {
	t.Helper()
	namings := map[string]bool{}
	for _, dir := range []string{"default", "crd"} {
		rel := filepath.Join(dir, "kustomization.yaml")
		namings[rel] = true
		data, err := os.ReadFile(filepath.Join(root, "manifests", rel))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Namespace string `json:"namespace"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		if k.Namespace != operatorNS {
			t.Fatalf("manifests/%s sets namespace %q, want %q", rel, k.Namespace, operatorNS)
		}
	}
	// Outside comments, no other manifest names it.
	err := filepath.WalkDir(filepath.Join(root, "manifests"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		if rel, _ := filepath.Rel(filepath.Join(root, "manifests"), path); namings[rel] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "#"); strings.Contains(code, operatorNS) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d names %s: leave the namespace to manifests/default's namespace:", rel, i+1, operatorNS)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkMovedObject checks that the overlay's object key names no namespace
// but the overlay's.
func checkMovedObject(t *testing.T, key string, u *unstructured.Unstructured) {
	t.Helper()
	// The namespace itself, every namespaced object, and each field
	// that names a namespace: binding subjects, webhook and conversion
	// Services.
	for _, path := range [][]string{{"metadata", "namespace"}, {"spec", "conversion", "webhook", "clientConfig", "service", "namespace"}} {
		if ns, ok, _ := unstructured.NestedString(u.Object, path...); ok && ns != elsewhere {
			t.Errorf("%s: %s is %q, want %q", key, strings.Join(path, "."), ns, elsewhere)
		}
	}
	for _, list := range []string{"subjects", "webhooks"} {
		items, _, _ := unstructured.NestedSlice(u.Object, list)
		for _, item := range items {
			m, _ := item.(map[string]any)
			ns, ok, _ := unstructured.NestedString(m, "namespace")
			if !ok {
				ns, ok, _ = unstructured.NestedString(m, "clientConfig", "service", "namespace")
			}
			if ok && ns != elsewhere {
				t.Errorf("%s: %s[] names namespace %q, want %q", key, list, ns, elsewhere)
			}
		}
	}
	if u.GetKind() == "Namespace" && u.GetName() != elsewhere {
		t.Errorf("the overlay creates Namespace %s, want %s", u.GetName(), elsewhere)
	}
	if b, _ := yaml.Marshal(u.Object); strings.Contains(string(b), operatorNS) {
		t.Errorf("%s still names %s", key, operatorNS)
	}
}
