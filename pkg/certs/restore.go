package certs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// AnnotationReplacedClientConfigs is set on every object whose clientConfigs
// a process running with Options.URL repointed. It holds what they were
// before, so that RestoreClientConfigs can put them back when that process
// stops: a local run must not leave a shared cluster calling an address
// that no longer answers.
const AnnotationReplacedClientConfigs = "handroll.dev/replaced-client-configs"

// errRestored stops an injection pass that would write after
// RestoreClientConfigs began.
var errRestored = errors.New("the client configurations are being restored")

// conversionKey is the record's key for a CRD's conversion clientConfig.
const conversionKey = "conversion"

// replaced is the annotation's value. ClientConfigs are keyed by webhook
// name (conversionKey for a CRD) and hold the clientConfig without its
// caBundle: the CA is shared through the Secret, and the bundle injected
// last is the one to keep.
type replaced struct {
	URL           string                     `json:"url"`
	ClientConfigs map[string]json.RawMessage `json:"clientConfigs"`
}

func readReplaced(meta *metav1.ObjectMeta) (replaced, error) {
	r := replaced{ClientConfigs: map[string]json.RawMessage{}}
	raw, ok := meta.Annotations[AnnotationReplacedClientConfigs]
	if !ok {
		return r, nil
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("annotation %s: %w", AnnotationReplacedClientConfigs, err)
	}
	if r.ClientConfigs == nil {
		r.ClientConfigs = map[string]json.RawMessage{}
	}
	return r, nil
}

// remember adds to the record on meta the clientConfigs of prior that the
// URL is about to replace. An entry already there is kept: after a run that
// was killed before it could restore, the record still holds the original,
// not the dead run's URL.
func (in injection) remember(meta *metav1.ObjectMeta, prior map[string]json.RawMessage) error {
	if in.url == "" || len(prior) == 0 {
		return nil
	}
	r, err := readReplaced(meta)
	if err != nil {
		return err
	}
	for name, cc := range prior {
		if _, ok := r.ClientConfigs[name]; !ok {
			r.ClientConfigs[name] = cc
		}
	}
	r.URL = in.url
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	metav1.SetMetaDataAnnotation(meta, AnnotationReplacedClientConfigs, string(b))
	return nil
}

// priorWebhooks lists the clientConfigs apply would replace.
func (in injection) priorWebhooks(names []string, ccs []*admissionregistrationv1.WebhookClientConfig) (map[string]json.RawMessage, error) {
	prior := map[string]json.RawMessage{}
	for i, cc := range ccs {
		if cc.Service == nil && (cc.URL == nil || strings.HasPrefix(*cc.URL, in.url)) {
			continue // ours already: nothing of someone else's to keep
		}
		c := cc.DeepCopy()
		c.CABundle = nil
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		prior[names[i]] = b
	}
	return prior, nil
}

func (in injection) rememberWebhooks(meta *metav1.ObjectMeta, names []string, ccs []*admissionregistrationv1.WebhookClientConfig) error {
	if in.url == "" {
		return nil
	}
	prior, err := in.priorWebhooks(names, ccs)
	if err != nil {
		return err
	}
	return in.remember(meta, prior)
}

// rememberCRD records the conversion clientConfig applyCRD would replace.
func (in injection) rememberCRD(crd *unstructured.Unstructured) error {
	if in.url == "" {
		return nil
	}
	cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
	if err != nil || cc == nil {
		return err
	}
	if u, ok := cc["url"].(string); ok && cc["service"] == nil && strings.HasPrefix(u, in.url) {
		return nil
	}
	delete(cc, "caBundle")
	b, err := json.Marshal(cc)
	if err != nil {
		return err
	}
	meta := metav1.ObjectMeta{Annotations: crd.GetAnnotations()}
	if err := in.remember(&meta, map[string]json.RawMessage{conversionKey: b}); err != nil {
		return err
	}
	crd.SetAnnotations(meta.Annotations)
	return nil
}

// RestoreClientConfigs puts back the clientConfigs this manager's URL
// replaced, in every target, and removes the record. A clientConfig that no
// longer calls the URL (someone re-applied the manifests since) is left as
// it is. It does nothing without Options.URL. Call it once the webhooks are
// about to stop being served, with a context of its own.
func (m *Manager) RestoreClientConfigs(ctx context.Context) error {
	if m.opts.URL == "" {
		return nil
	}
	m.restored.Store(true)
	var errs []error
	for _, t := range m.targets() {
		var err error
		switch t.kind {
		case "MutatingWebhookConfiguration":
			err = m.restoreMutating(ctx, t.name)
		case "ValidatingWebhookConfiguration":
			err = m.restoreValidating(ctx, t.name)
		case "CustomResourceDefinition":
			err = m.restoreCRD(ctx, t.name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// restoreWebhooks changes ccs back to the record on meta; it reports
// whether there was a record (then the object is to be written).
func (m *Manager) restoreWebhooks(kind, name string, meta *metav1.ObjectMeta, names []string, ccs []*admissionregistrationv1.WebhookClientConfig) (bool, error) {
	if _, ok := meta.Annotations[AnnotationReplacedClientConfigs]; !ok {
		return false, nil
	}
	r, err := readReplaced(meta)
	if err != nil {
		return false, err
	}
	for i, cc := range ccs {
		saved, ok := r.ClientConfigs[names[i]]
		if !ok || cc.URL == nil || !strings.HasPrefix(*cc.URL, m.opts.URL) {
			continue
		}
		var prior admissionregistrationv1.WebhookClientConfig
		if err := json.Unmarshal(saved, &prior); err != nil {
			return false, fmt.Errorf("annotation %s, webhook %s: %w", AnnotationReplacedClientConfigs, names[i], err)
		}
		cc.URL, cc.Service = prior.URL, prior.Service
		klog.InfoS("Restoring the webhook's client configuration", "kind", kind, "name", name, "webhook", names[i])
	}
	delete(meta.Annotations, AnnotationReplacedClientConfigs)
	return true, nil
}

func (m *Manager) restoreMutating(ctx context.Context, name string) error {
	client := m.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		names, ccs := mutatingClientConfigs(obj)
		if write, err := m.restoreWebhooks("MutatingWebhookConfiguration", name, &obj.ObjectMeta, names, ccs); err != nil || !write {
			return err
		}
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}

func (m *Manager) restoreValidating(ctx context.Context, name string) error {
	client := m.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		names, ccs := validatingClientConfigs(obj)
		if write, err := m.restoreWebhooks("ValidatingWebhookConfiguration", name, &obj.ObjectMeta, names, ccs); err != nil || !write {
			return err
		}
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}

func (m *Manager) restoreCRD(ctx context.Context, name string) error {
	client := m.dyn.Resource(crdResource)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		meta := metav1.ObjectMeta{Annotations: crd.GetAnnotations()}
		if _, ok := meta.Annotations[AnnotationReplacedClientConfigs]; !ok {
			return nil
		}
		r, err := readReplaced(&meta)
		if err != nil {
			return err
		}
		cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
		if err != nil {
			return err
		}
		if saved, ok := r.ClientConfigs[conversionKey]; ok && cc != nil {
			if u, _ := cc["url"].(string); strings.HasPrefix(u, m.opts.URL) {
				var prior map[string]any
				if err := json.Unmarshal(saved, &prior); err != nil {
					return fmt.Errorf("annotation %s: %w", AnnotationReplacedClientConfigs, err)
				}
				if bundle, ok := cc["caBundle"]; ok {
					prior["caBundle"] = bundle
				}
				if err := unstructured.SetNestedMap(crd.Object, prior, "spec", "conversion", "webhook", "clientConfig"); err != nil {
					return err
				}
				klog.InfoS("Restoring the conversion webhook's client configuration", "name", name)
			}
		}
		delete(meta.Annotations, AnnotationReplacedClientConfigs)
		crd.SetAnnotations(meta.Annotations)
		_, err = client.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
}

func mutatingClientConfigs(obj *admissionregistrationv1.MutatingWebhookConfiguration) ([]string, []*admissionregistrationv1.WebhookClientConfig) {
	names := make([]string, len(obj.Webhooks))
	ccs := make([]*admissionregistrationv1.WebhookClientConfig, len(obj.Webhooks))
	for i := range obj.Webhooks {
		names[i], ccs[i] = obj.Webhooks[i].Name, &obj.Webhooks[i].ClientConfig
	}
	return names, ccs
}

func validatingClientConfigs(obj *admissionregistrationv1.ValidatingWebhookConfiguration) ([]string, []*admissionregistrationv1.WebhookClientConfig) {
	names := make([]string, len(obj.Webhooks))
	ccs := make([]*admissionregistrationv1.WebhookClientConfig, len(obj.Webhooks))
	for i := range obj.Webhooks {
		names[i], ccs[i] = obj.Webhooks[i].Name, &obj.Webhooks[i].ClientConfig
	}
	return names, ccs
}
