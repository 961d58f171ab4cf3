package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/test/budget"
)

// manifests are the objects of one tree's manifests/crd and
// manifests/webhook, as that release ships them.
type manifests struct {
	crds       []*apiextensionsv1.CustomResourceDefinition
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
}

func readManifests(t *testing.T, tree string) manifests {
	t.Helper()
	var m manifests
	for _, dir := range []string{"crd", "webhook"} {
		files, err := filepath.Glob(filepath.Join(tree, "manifests", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := m.read(f); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	if len(m.crds) == 0 || len(m.mutating) == 0 || len(m.validating) == 0 {
		t.Fatalf("%s/manifests: want the CRD and both webhook configurations, got %d, %d and %d", tree, len(m.crds), len(m.mutating), len(m.validating))
	}
	return m
}

func (m *manifests) read(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		raw, err := utilyaml.ToJSON(doc)
		if err != nil {
			return err
		}
		var meta metav1.TypeMeta
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
		var into any
		switch meta.Kind {
		case "CustomResourceDefinition":
			o := &apiextensionsv1.CustomResourceDefinition{}
			m.crds, into = append(m.crds, o), o
		case "MutatingWebhookConfiguration":
			o := &admissionregistrationv1.MutatingWebhookConfiguration{}
			m.mutating, into = append(m.mutating, o), o
		case "ValidatingWebhookConfiguration":
			o := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			m.validating, into = append(m.validating, o), o
		default:
			continue // the Service, kustomization.yaml
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return err
		}
	}
}

// atService is what a cluster's copy of clientConfig is, once installed:
// kustomize names the Service, and the CA bundle is injected. Here the
// Service is the loopback one, so the clientConfig calls its URL with the
// path the manifest gives.
func atService(cc admissionregistrationv1.WebhookClientConfig, url string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil {
		path = ptr.Deref(cc.Service.Path, "")
	}
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
}

// applyWebhooks creates or replaces the webhook configurations, calling the
// Service.
func (m manifests) applyWebhooks(ctx context.Context, t *testing.T, kube kubernetes.Interface, url string, caBundle []byte) {
	t.Helper()
	ar := kube.AdmissionregistrationV1()
	for _, o := range m.mutating {
		o = o.DeepCopy()
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig = atService(o.Webhooks[i].ClientConfig, url, caBundle)
		}
		c := ar.MutatingWebhookConfigurations()
		err := replace(ctx, o, func(ctx context.Context) (metav1.Object, error) { return c.Get(ctx, o.Name, metav1.GetOptions{}) },
			func(ctx context.Context) error { _, err := c.Create(ctx, o, metav1.CreateOptions{}); return err },
			func(ctx context.Context) error { _, err := c.Update(ctx, o, metav1.UpdateOptions{}); return err })
		if err != nil {
			t.Fatalf("MutatingWebhookConfiguration %s: %v", o.Name, err)
		}
	}
	for _, o := range m.validating {
		o = o.DeepCopy()
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig = atService(o.Webhooks[i].ClientConfig, url, caBundle)
		}
		c := ar.ValidatingWebhookConfigurations()
		err := replace(ctx, o, func(ctx context.Context) (metav1.Object, error) { return c.Get(ctx, o.Name, metav1.GetOptions{}) },
			func(ctx context.Context) error { _, err := c.Create(ctx, o, metav1.CreateOptions{}); return err },
			func(ctx context.Context) error { _, err := c.Update(ctx, o, metav1.UpdateOptions{}); return err })
		if err != nil {
			t.Fatalf("ValidatingWebhookConfiguration %s: %v", o.Name, err)
		}
	}
}

// applyCRDs creates or replaces the CRDs, their conversion webhook calling
// the Service, and waits until each is Established.
func (m manifests) applyCRDs(ctx context.Context, t *testing.T, ext apiextensionsclient.Interface, url string, caBundle []byte) {
	t.Helper()
	c := ext.ApiextensionsV1().CustomResourceDefinitions()
	for _, o := range m.crds {
		o = o.DeepCopy()
		if conv := o.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
			cc := conv.Webhook.ClientConfig
			path := ""
			if cc.Service != nil {
				path = ptr.Deref(cc.Service.Path, "")
			}
			conv.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
		}
		err := replace(ctx, o, func(ctx context.Context) (metav1.Object, error) { return c.Get(ctx, o.Name, metav1.GetOptions{}) },
			func(ctx context.Context) error { _, err := c.Create(ctx, o, metav1.CreateOptions{}); return err },
			func(ctx context.Context) error { _, err := c.Update(ctx, o, metav1.UpdateOptions{}); return err })
		if err != nil {
			t.Fatalf("CustomResourceDefinition %s: %v", o.Name, err)
		}
		err = budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := c.Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CustomResourceDefinition %s not Established: %v", o.Name, err)
		}
	}
}

// replace creates obj, or updates it over the object of its name (the
// manifest replaces what is there, as kubectl apply --force-conflicts would
// for the fields it sets).
func replace(ctx context.Context, obj metav1.Object, get func(context.Context) (metav1.Object, error), create, update func(context.Context) error) error {
	existing, err := get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return create(ctx)
	case err != nil:
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	if err := update(ctx); err != nil {
		return fmt.Errorf("replacing: %w", err)
	}
	return nil
}
