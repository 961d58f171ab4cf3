package operator

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/test/controlplane"
)

// ManifestObjects decodes every object of the YAML files of manifests/dir
// with handroll's scheme, in file order, kustomization.yaml left out; a
// document that does not decode fails t.
func ManifestObjects(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	decoder := scheme.Codecs(s).UniversalDeserializer()
	files, _ := filepath.Glob(filepath.Join(root, "manifests", dir, "*.yaml"))
	var out []runtime.Object
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			raw, err := utilyaml.ToJSON(doc)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			obj, _, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, obj)
		}
	}
	return out
}

// ManifestWebhookConfigurations reads the mutating and the validating
// webhook configuration of manifests/webhook, so that every test admits
// WebApps with the rules and matchConditions a cluster gets.
func ManifestWebhookConfigurations(t *testing.T) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	var mutating *admissionregistrationv1.MutatingWebhookConfiguration
	var validating *admissionregistrationv1.ValidatingWebhookConfiguration
	for _, obj := range ManifestObjects(t, "webhook") {
		switch o := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			if mutating != nil {
				t.Fatalf("manifests/webhook has more than one MutatingWebhookConfiguration")
			}
			mutating = o
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			if validating != nil {
				t.Fatalf("manifests/webhook has more than one ValidatingWebhookConfiguration")
			}
			validating = o
		}
	}
	if mutating == nil || validating == nil || len(mutating.Webhooks) != 1 || len(validating.Webhooks) != 1 {
		t.Fatalf("manifests/webhook must hold a mutating and a validating webhook configuration of one webhook each")
	}
	return mutating, validating
}
