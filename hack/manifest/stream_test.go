package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// oddStream holds, between its objects, what a line pattern misreads: a
// separator with a comment, "---" and "kind:" lines inside a block scalar
// and a string, empty documents, a List, a bare sequence, a quoted kind.
const oddStream = `# leading comment
--- # the namespace
apiVersion: v1
kind: Namespace
metadata:
  name: ops
---
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  namespace: ops
data:
  run.sh: |
    echo one
    ---
    kind: CustomResourceDefinition
---
kind: List
apiVersion: v1
items:
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: a.example.dev}
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: sa, namespace: ops}
--- !!seq
- apiVersion: apps/v1
  kind: "Deployment"
  metadata:
    name: handroll
    namespace: ops
    annotations:
      note: "a --- b"
- &crd
  apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: b.example.dev}
--- {kind: ConfigMapList, apiVersion: v1, items: null}
...
`

// kindsAndNames lists the objects of a stream as kind/name.
func kindsAndNames(t *testing.T, stream []byte) []string {
	t.Helper()
	roots, err := documents(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objects(roots)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		var obj struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := o.Decode(&obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.Kind+"/"+obj.Metadata.Name)
	}
	return out
}

func TestObjects(t *testing.T) {
	want := []string{
		"Namespace/ops", "ConfigMap/script", "CustomResourceDefinition/a.example.dev", "ServiceAccount/sa",
		"Deployment/handroll", "CustomResourceDefinition/b.example.dev",
	}
	for name, stream := range map[string]string{
		"LF":   oddStream,
		"CRLF": strings.ReplaceAll(oddStream, "\n", "\r\n"),
	} {
		if got := kindsAndNames(t, []byte(stream)); !slices.Equal(got, want) {
			t.Errorf("%s: the objects are\n\t%s\nwant\n\t%s", name, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	for _, empty := range []string{"", "---\n", "# nothing\n", "---\n---\n...\n", "--- # c\r\n---\r\n"} {
		if got := kindsAndNames(t, []byte(empty)); len(got) != 0 {
			t.Errorf("%q holds %v, want nothing", empty, got)
		}
	}
	for stream, msg := range map[string]string{
		"kind: Secret\n---\nmetadata: {}\n":    "document 2 (line 3): not an object with a kind",
		"- kind: Secret\n- just a string\n":    "document 1, item 2 (line 2): not an object",
		"kind: List\nitems: {a: 1}\n":          "a List whose items are not a list",
		"kind: Secret\nkind: ConfigMap\n":      "not an object with a kind",
		"kind: Secret\nmetadata: [\n":          "document 1: yaml:",
		"kind: Secret\n---\nkind: [a\n":        "document 2: yaml:",
		"kind: List\nitems:\n- kind: [Secret]": "item 1 (line 3): not an object with a kind",
	} {
		roots, err := documents(strings.NewReader(stream))
		if err == nil {
			_, err = objects(roots)
		}
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v; want an error saying %q", stream, err, msg)
		}
	}
}

// TestSelect runs the select command as hack/deploy.sh does and checks
// what it prints, object by object, against the input's.
func TestSelect(t *testing.T) {
	file := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(oddStream, "\n", "\r\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	sel := func(args ...string) []byte {
		t.Helper()
		var out bytes.Buffer
		if err := runSelect(append(args, file), &out); err != nil {
			t.Fatalf("select %v: %v", args, err)
		}
		return out.Bytes()
	}
	crds := sel("--kind", "CustomResourceDefinition")
	if got, want := kindsAndNames(t, crds), []string{"CustomResourceDefinition/a.example.dev", "CustomResourceDefinition/b.example.dev"}; !slices.Equal(got, want) {
		t.Errorf("--kind CustomResourceDefinition: %v, want %v", got, want)
	}
	if strings.Contains(string(crds), "&crd") || strings.Contains(string(crds), "*crd") {
		t.Errorf("the printed objects keep an anchor or alias:\n%s", crds)
	}
	rest := sel("--except-kind", "CustomResourceDefinition", "--except-kind", "Namespace")
	if got, want := kindsAndNames(t, rest), []string{"ConfigMap/script", "ServiceAccount/sa", "Deployment/handroll"}; !slices.Equal(got, want) {
		t.Errorf("--except-kind CustomResourceDefinition --except-kind Namespace: %v, want %v", got, want)
	}
	// The block scalar and the string come out whole.
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(rest, &cm); err != nil {
		t.Fatal(err)
	}
	if want := "echo one\n---\nkind: CustomResourceDefinition\n"; cm.Data["run.sh"] != want {
		t.Errorf("the ConfigMap's script came out as %q, want %q", cm.Data["run.sh"], want)
	}
	if !strings.Contains(string(rest), "a --- b") {
		t.Errorf("the Deployment's annotation is lost:\n%s", rest)
	}
	if got := sel("--kind", "Secret"); len(got) != 0 {
		t.Errorf("--kind Secret printed %q, want nothing", got)
	}
	for _, args := range [][]string{{}, {"--kind", "A", "--except-kind", "B"}, {"--kind", "A"}} {
		if err := runSelect(args, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("select %v: %v, want the usage", args, err)
		}
	}
}

func TestNamespace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	odd := write("odd.yaml", oddStream)
	var out bytes.Buffer
	if err := runNamespace([]string{"--kind", "Deployment", "--name", "handroll", odd}, &out); err != nil || out.String() != "ops\n" {
		t.Errorf("namespace of Deployment handroll: %q, %v; want ops", out.String(), err)
	}
	twice := write("twice.yaml", oddStream+"---\n"+oddStream)
	noNS := write("nons.yaml", "kind: Deployment\nmetadata: {name: handroll}\n")
	for args, msg := range map[string]string{
		"--kind Deployment --name other " + odd:      "holds 0 objects Deployment other",
		"--kind Deployment --name handroll " + twice: "holds 2 objects Deployment handroll",
		"--kind Deployment --name handroll " + noNS:  "has no namespace",
	} {
		err := runNamespace(strings.Fields(args), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("namespace %s: %v; want an error saying %q", args, err, msg)
		}
	}
}
