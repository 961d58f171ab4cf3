package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
)

// object is one parsed manifest, numbers as float64 whichever side wrote it.
type object = map[string]any

// objects are a rendering's objects by "Kind namespace/name".
type objects map[string]object

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return fmt.Sprintf("%s %s/%s", o["kind"], ns, name)
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// helmPath is $HELM (make test sets it), else the helm `make helm` builds
// into .local/bin on first use. It skips the test only where helm cannot be
// built at all.
func helmPath(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: helm is built from source on first use, which takes minutes")
	}
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			if _, err := exec.LookPath(p); err != nil {
				helmErr = fmt.Errorf("HELM=%s: %w", p, err)
			}
			helmBin = p
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("make", "--no-print-directory", "-s", "helm")
		cmd.Dir, cmd.Stderr = repoRoot(t), &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("make helm: %v\n%s", err, stderr.Bytes())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		helmBin = lines[len(lines)-1]
	})
	if helmErr != nil {
		if os.Getenv("HELM") != "" {
			t.Fatal(helmErr)
		}
		t.Skipf("SKIPPED: helm cannot be built here, so the chart is not checked: %v", helmErr)
	}
	return helmBin
}

// kubectlPath finds kubectl as test/manifests does: KUBEBUILDER_ASSETS,
// else `hack/testbin.sh path`.
func kubectlPath(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: rendering manifests/default needs kubectl from hack/testbin.sh")
	}
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		if p := filepath.Join(assets, "kubectl"); isExec(p) {
			return p
		}
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "hack", "testbin.sh"), "path")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/testbin.sh path: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "kubectl")
	if !isExec(p) {
		t.Fatalf("no kubectl at %s; run 'make testbin'", p)
	}
	return p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// run runs a command in the repository's root and returns its stdout, or
// an error holding its stderr.
func run(t testing.TB, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = repoRoot(t), &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// template is `helm template handroll charts/handroll -n namespace` with
// args (--set ... and the like).
func template(t testing.TB, namespace string, args ...string) (objects, error) {
	t.Helper()
	argv := append([]string{"template", "handroll", "charts/handroll", "--namespace", namespace}, args...)
	out, err := run(t, nil, helmPath(t), argv...)
	if err != nil {
		return nil, err
	}
	return parse(t, out, "helm template"), nil
}

func mustTemplate(t testing.TB, namespace string, args ...string) objects {
	t.Helper()
	objs, err := template(t, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// kustomize builds the overlay at dir with kubectl, as hack/deploy.sh does.
func kustomize(t testing.TB, dir string) objects {
	t.Helper()
	out, err := run(t, nil, kubectlPath(t), "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, out, dir)
}

// overlay writes a kustomization.yaml into a new directory: resources and
// components are paths under the repository (or absolute), namespace may be
// empty. The image is set as hack/deploy.sh sets it.
func overlay(t testing.TB, namespace, image string, resources, components []string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(repoRoot(t), p)
		}
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	if namespace != "" {
		fmt.Fprintf(&b, "namespace: %s\n", namespace)
	}
	b.WriteString("resources:\n")
	for _, r := range resources {
		fmt.Fprintf(&b, "- %s\n", rel(r))
	}
	if len(components) > 0 {
		b.WriteString("components:\n")
		for _, c := range components {
			fmt.Fprintf(&b, "- %s\n", rel(c))
		}
	}
	if image != "" {
		name, tag, _ := strings.Cut(image, ":")
		fmt.Fprintf(&b, "images:\n- name: ghcr.io/handroll/handroll\n  newName: %s\n  newTag: %q\n", name, tag)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// parse decodes multi-document YAML through JSON, failing t on an object
// given twice.
func parse(t testing.TB, data []byte, what string) objects {
	t.Helper()
	objs := objects{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if o == nil {
			continue
		}
		k := key(o)
		if _, dup := objs[k]; dup {
			t.Fatalf("%s holds %s twice", what, k)
		}
		objs[k] = o
	}
}

func (objs objects) keys() []string {
	ks := make([]string, 0, len(objs))
	for k := range objs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// helmLabels are the labels the chart adds to every object's metadata,
// beside the manifests' own.
func helmLabels() map[string]string {
	return map[string]string{
		"helm.sh/chart":                "handroll-" + chartVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   "handroll",
		"app.kubernetes.io/version":    appVersion,
	}
}

// withoutHelm returns a copy of the chart's objects with what the chart
// adds for Helm alone taken away, checking first that it is there: the
// labels on every object, on the CRD helm.sh/resource-policy, and the
// uninstall hook's objects (make undeploy does their work itself).
func withoutHelm(t testing.TB, chart objects) objects {
	t.Helper()
	out := objects{}
	for k, o := range chart {
		if hook := dig(o, "metadata", "annotations", "helm.sh/hook"); hook != nil {
			if kind, name := o["kind"].(string), dig(o, "metadata", "name"); hook != "pre-delete" || !slices.Contains(uninstallHook, fmt.Sprintf("%s %v", kind, name)) {
				t.Errorf("%s: an unexpected hook %v", k, hook)
			}
			continue
		}
		c := deepCopy(o)
		md := c["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		for l, v := range helmLabels() {
			if labels[l] != v {
				t.Errorf("%s: label %s is %v, want %q", k, l, labels[l], v)
			}
			delete(labels, l)
		}
		if len(labels) == 0 {
			delete(md, "labels")
		}
		if c["kind"] == "CustomResourceDefinition" {
			ann, _ := md["annotations"].(map[string]any)
			delete(ann, "helm.sh/resource-policy")
		}
		out[k] = c
	}
	return out
}

func deepCopy(o object) object {
	data, err := yaml.Marshal(o)
	if err != nil {
		panic(err)
	}
	var c object
	if err := yaml.Unmarshal(data, &c); err != nil {
		panic(err)
	}
	return c
}

// celSpaces collapses the white space of the webhooks' CEL match
// conditions, which means nothing to CEL: kustomize re-folds a folded
// scalar's more-indented lines with an extra line break.
func celSpaces(objs objects) {
	for _, o := range objs {
		webhooks, _ := o["webhooks"].([]any)
		for _, w := range webhooks {
			conds, _ := dig(w, "matchConditions").([]any)
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok {
					if e, ok := m["expression"].(string); ok {
						m["expression"] = strings.Join(strings.Fields(e), " ")
					}
				}
			}
		}
	}
}

// sameObjects fails t with a diff for every object that one side has and
// the other has not, or that differs.
func sameObjects(t testing.TB, got, want objects, gotWhat, wantWhat string) {
	t.Helper()
	celSpaces(got)
	celSpaces(want)
	for _, k := range want.keys() {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s has %s, %s has not", wantWhat, k, gotWhat)
			continue
		}
		if d := cmp.Diff(want[k], g); d != "" {
			t.Errorf("%s differs between %s and %s (-%s +%s):\n%s", k, wantWhat, gotWhat, wantWhat, gotWhat, d)
		}
	}
	for _, k := range got.keys() {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %s, %s has not", gotWhat, k, wantWhat)
		}
	}
}

// dig follows a path of map keys and list indexes through an object.
func dig(o any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[p]
		case int:
			l, ok := o.([]any)
			if !ok || p >= len(l) {
				return nil
			}
			o = l[p]
		}
	}
	return o
}
