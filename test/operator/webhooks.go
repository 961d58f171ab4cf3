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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/test/controlplane"
)

// ManifestWebhookConfigurations reads the mutating and the validating
// webhook configuration of manifests/webhook, so that every test admits
// WebApps with the rules and matchConditions a cluster gets.
func ManifestWebhookConfigurations(t *testing.T) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
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
	var mutating *admissionregistrationv1.MutatingWebhookConfiguration
	var validating *admissionregistrationv1.ValidatingWebhookConfiguration
	files, _ := filepath.Glob(filepath.Join(root, "manifests", "webhook", "*.yaml"))
	for _, f := range files {
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
				// kustomization.yaml and anything else not a Kubernetes object.
				continue
			}
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
	}
	if mutating == nil || validating == nil || len(mutating.Webhooks) != 1 || len(validating.Webhooks) != 1 {
		t.Fatalf("manifests/webhook must hold a mutating and a validating webhook configuration of one webhook each")
	}
	return mutating, validating
}
