package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/handroll/handroll/test/controlplane"
)

// TestBuildInstaller runs `make build-installer` into a temporary file and
// checks that it holds every object of manifests/default, unchanged but
// for the Deployment's image, which is IMG. The other forms of IMG (a
// registry with a port, a digest) go through hack/deploy.sh render, which
// the target runs.
func TestBuildInstaller(t *testing.T) {
	kubectl := kubectlPath(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	def := kustomize(t, kubectl, "default")
	env := append(os.Environ(), "KUBECTL="+kubectl, "KUSTOMIZE_DIR=")

	t.Run("make", func(t *testing.T) {
		if _, err := exec.LookPath("make"); err != nil {
			t.Skip("no make on PATH")
		}
		const img = "example.invalid/handroll:v9"
		installer := filepath.Join(t.TempDir(), "dist", "install.yaml")
		cmd := exec.Command("make", "--no-print-directory", "build-installer", "IMG="+img, "INSTALLER="+installer)
		cmd.Dir, cmd.Env = root, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build-installer: %v\n%s", err, out)
		}
		data, err := os.ReadFile(installer)
		if err != nil {
			t.Fatal(err)
		}
		checkInstaller(t, def, data, img)
		if _, err := os.Stat(installer + ".tmp"); !os.IsNotExist(err) {
			t.Errorf("make build-installer left %s.tmp behind", installer)
		}
	})

	for _, img := range []string{
		"example.invalid:5000/team/handroll:v9",
		"example.invalid/handroll@sha256:" + strings.Repeat("ab", 32),
		"ghcr.io/handroll/handroll", // no tag: kustomize leaves the manifest's
	} {
		t.Run(img, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command("bash", filepath.Join(root, "hack", "deploy.sh"), "render", "manifests/default", img)
			cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, env, &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("hack/deploy.sh render: %v\n%s", err, stderr.Bytes())
			}
			want := img
			if img == "ghcr.io/handroll/handroll" {
				want = get[appsv1.Deployment](t, def, deploymentKey(t, def)).Spec.Template.Spec.Containers[0].Image
			}
			checkInstaller(t, def, stdout.Bytes(), want)
		})
	}
}

// checkInstaller checks that data holds the objects of def, the
// Deployment's image being img and nothing else changed.
func checkInstaller(t *testing.T, def built, data []byte, img string) {
	t.Helper()
	got := parseBuilt(t, data, "the installer")
	keys := func(b built) []string {
		var ks []string
		for k := range b {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if !slices.Equal(keys(got), keys(def)) {
		t.Fatalf("the installer holds\n\t%s\nmanifests/default builds\n\t%s", strings.Join(keys(got), "\n\t"), strings.Join(keys(def), "\n\t"))
	}
	depKey := deploymentKey(t, def)
	for key, u := range def {
		if key != depKey && !apiequality.Semantic.DeepEqual(u.Object, got[key].Object) {
			t.Errorf("the installer's %s differs from manifests/default's", key)
		}
	}
	dep := get[appsv1.Deployment](t, got, depKey)
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the installer's Deployment has %d containers, want 1", len(dep.Spec.Template.Spec.Containers))
	}
	if image := dep.Spec.Template.Spec.Containers[0].Image; image != img {
		t.Errorf("the installer's Deployment runs %q, want %q", image, img)
	}
	want := get[appsv1.Deployment](t, def, depKey)
	want.Spec.Template.Spec.Containers[0].Image = img
	if !apiequality.Semantic.DeepEqual(want, dep) {
		t.Errorf("the installer changes the Deployment beyond its image")
	}
}

func deploymentKey(t *testing.T, objs built) string {
	t.Helper()
	key, ok := findKind(objs, "Deployment")
	if !ok {
		t.Fatalf("want one Deployment, the build has %q", key)
	}
	return key
}
