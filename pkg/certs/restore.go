package certs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
// last is the one to keep. RenewTime is the writer's clock, read only by
// the writer: another manager judges staleness by how long it has seen the
// same value, as client-go's leader election does, so clock skew between a
// laptop and the cluster does not matter.
type replaced struct {
	URL           string                     `json:"url"`
	RenewTime     string                     `json:"renewTime"`
	ClientConfigs map[string]json.RawMessage `json:"clientConfigs"`
}

func readReplaced(meta metav1.Object) (r replaced, ok bool, err error) {
	r.ClientConfigs = map[string]json.RawMessage{}
	raw, ok := meta.GetAnnotations()[AnnotationReplacedClientConfigs]
	if !ok {
		return r, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, true, fmt.Errorf("annotation %s: %w", AnnotationReplacedClientConfigs, err)
	}
	if r.ClientConfigs == nil {
		r.ClientConfigs = map[string]json.RawMessage{}
	}
	return r, true, nil
}

func writeReplaced(meta metav1.Object, r replaced) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	a := meta.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationReplacedClientConfigs] = string(b)
	meta.SetAnnotations(a)
	return nil
}

func dropReplaced(meta metav1.Object) {
	a := meta.GetAnnotations()
	delete(a, AnnotationReplacedClientConfigs)
	meta.SetAnnotations(a)
}

// records is what an injection pass does with the records.
type records struct {
	now time.Time
	// renew: with a URL, a record older than this is renewed.
	renew time.Duration
	// stale: without a URL, whether target's record, last renewed at
	// renewTime, has gone unrenewed too long. nil: never.
	stale func(target, renewTime string) bool
}

// remember adds to the record on meta the clientConfigs of prior that the
// URL is about to replace, and renews it. An entry already there is kept:
// after a run that was killed before it could restore, the record still
// holds the original, not the dead run's URL. It reports whether meta
// changed.
func (in injection) remember(meta metav1.Object, prior map[string]json.RawMessage) (bool, error) {
	r, had, err := readReplaced(meta)
	if err != nil || (!had && len(prior) == 0) {
		return false, err
	}
	added := false
	for name, cc := range prior {
		if _, ok := r.ClientConfigs[name]; !ok {
			r.ClientConfigs[name] = cc
			added = true
		}
	}
	renewed, perr := time.Parse(time.RFC3339Nano, r.RenewTime)
	if !added && r.URL == in.url && perr == nil && in.records.now.Sub(renewed) < in.records.renew {
		return false, nil
	}
	r.URL, r.RenewTime = in.url, in.records.now.UTC().Format(time.RFC3339Nano)
	return true, writeReplaced(meta, r)
}

// webhookRecords is what a pass does with the record of a webhook
// configuration before it injects: with a URL, remember what the URL
// replaces; without, restore a record nobody renews any more.
func (in injection) webhookRecords(target string, meta metav1.Object, names []string, ccs []*admissionregistrationv1.WebhookClientConfig) (bool, error) {
	if in.url != "" {
		prior, err := in.priorWebhooks(names, ccs)
		if err != nil {
			return false, err
		}
		return in.remember(meta, prior)
	}
	r, ok, err := in.abandoned(target, meta)
	if err != nil || !ok {
		return false, err
	}
	return true, restoreWebhooks(target, meta, names, ccs, r)
}

// abandoned returns the record on meta when nobody renews it any more.
func (in injection) abandoned(target string, meta metav1.Object) (replaced, bool, error) {
	r, had, err := readReplaced(meta)
	if err != nil || !had || in.records.stale == nil || !in.records.stale(target, r.RenewTime) {
		return r, false, err
	}
	klog.InfoS("The process serving the webhooks at a URL stopped renewing its record; restoring the client configurations it replaced",
		"target", target, "url", r.URL, "renewTime", r.RenewTime)
	return r, true, nil
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

// crdRecords does for a CRD's conversion what webhookRecords does.
func (in injection) crdRecords(target string, crd *unstructured.Unstructured) (bool, error) {
	if in.url != "" {
		cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
		if err != nil {
			return false, err
		}
		prior := map[string]json.RawMessage{}
		if u, ok := cc["url"].(string); cc != nil && (cc["service"] != nil || !ok || !strings.HasPrefix(u, in.url)) {
			delete(cc, "caBundle")
			b, err := json.Marshal(cc)
			if err != nil {
				return false, err
			}
			prior[conversionKey] = b
		}
		return in.remember(crd, prior)
	}
	r, ok, err := in.abandoned(target, crd)
	if err != nil || !ok {
		return false, err
	}
	return true, restoreCRD(target, crd, r)
}

// restoreWebhooks puts back the clientConfigs of r that still call r's
// URL (one that no longer does was changed by someone since, and is left
// as it is), keeping their caBundle, and drops the record.
func restoreWebhooks(target string, meta metav1.Object, names []string, ccs []*admissionregistrationv1.WebhookClientConfig, r replaced) error {
	for i, cc := range ccs {
		saved, ok := r.ClientConfigs[names[i]]
		if !ok || cc.URL == nil || !strings.HasPrefix(*cc.URL, r.URL) {
			continue
		}
		var prior admissionregistrationv1.WebhookClientConfig
		if err := json.Unmarshal(saved, &prior); err != nil {
			return fmt.Errorf("annotation %s, webhook %s: %w", AnnotationReplacedClientConfigs, names[i], err)
		}
		cc.URL, cc.Service = prior.URL, prior.Service
		klog.InfoS("Restored the webhook's client configuration", "target", target, "webhook", names[i])
	}
	dropReplaced(meta)
	return nil
}

// restoreCRD does for a CRD's conversion what restoreWebhooks does.
func restoreCRD(target string, crd *unstructured.Unstructured, r replaced) error {
	cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
	if err != nil {
		return err
	}
	if saved, ok := r.ClientConfigs[conversionKey]; ok && cc != nil {
		if u, _ := cc["url"].(string); strings.HasPrefix(u, r.URL) {
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
			klog.InfoS("Restored the conversion webhook's client configuration", "target", target)
		}
	}
	dropReplaced(crd)
	return nil
}

// staleRecord tracks, per target, since when this manager has seen the same
// renewTime; owned by the worker.
func (m *Manager) staleRecord(target, renewTime string) bool {
	now := m.opts.Clock.Now()
	w, ok := m.records[target]
	if !ok || w.renewTime != renewTime {
		m.records[target] = recordSeen{renewTime: renewTime, since: now}
		m.recordPending = true
		return false
	}
	if now.Sub(w.since) >= StaleRecordRenewals*m.opts.RecordRenewal {
		delete(m.records, target)
		return true
	}
	m.recordPending = true
	return false
}

type recordSeen struct {
	renewTime string
	since     time.Time
}

// RestoreClientConfigs puts back the clientConfigs this manager's URL
// replaced, in every target, and removes the record. A clientConfig that no
// longer calls the URL (someone re-applied the manifests since) is left as
// it is, and so is a record another URL has taken over. It does nothing
// without Options.URL. Call it once, when the webhooks are about to stop
// being served, with a context of its own: no injection pass writes after
// it began.
func (m *Manager) RestoreClientConfigs(ctx context.Context) error {
	if m.opts.URL == "" {
		return nil
	}
	m.restored.Store(true)
	admission := m.kube.AdmissionregistrationV1()
	var errs []error
	for _, t := range m.targets() {
		var err error
		switch t.kind {
		case "MutatingWebhookConfiguration":
			c := admission.MutatingWebhookConfigurations()
			err = restoreTarget(ctx, m.opts.URL, getter(c.Get, t.name), func(o *admissionregistrationv1.MutatingWebhookConfiguration, r replaced) error {
				names, ccs := mutatingClientConfigs(o)
				return restoreWebhooks(t.String(), o, names, ccs, r)
			}, updater(c.Update))
		case "ValidatingWebhookConfiguration":
			c := admission.ValidatingWebhookConfigurations()
			err = restoreTarget(ctx, m.opts.URL, getter(c.Get, t.name), func(o *admissionregistrationv1.ValidatingWebhookConfiguration, r replaced) error {
				names, ccs := validatingClientConfigs(o)
				return restoreWebhooks(t.String(), o, names, ccs, r)
			}, updater(c.Update))
		case "CustomResourceDefinition":
			c := m.dyn.Resource(crdResource)
			err = restoreTarget(ctx, m.opts.URL,
				func(ctx context.Context) (*unstructured.Unstructured, error) {
					return c.Get(ctx, t.name, metav1.GetOptions{})
				},
				func(o *unstructured.Unstructured, r replaced) error { return restoreCRD(t.String(), o, r) },
				func(ctx context.Context, o *unstructured.Unstructured) error {
					_, err := c.Update(ctx, o, updateOptions)
					return err
				})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// restoreTarget reads a target, restores its record when it is url's, and
// writes it; a conflict reads it again.
func restoreTarget[T metav1.Object](ctx context.Context, url string,
	get func(context.Context) (T, error),
	change func(T, replaced) error,
	update func(context.Context, T) error,
) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		r, had, err := readReplaced(obj)
		if err != nil || !had || r.URL != url {
			return err
		}
		if err := change(obj, r); err != nil {
			return err
		}
		return update(ctx, obj)
	})
}

func getter[T any](get func(context.Context, string, metav1.GetOptions) (T, error), name string) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) { return get(ctx, name, metav1.GetOptions{}) }
}

func updater[T any](update func(context.Context, T, metav1.UpdateOptions) (T, error)) func(context.Context, T) error {
	return func(ctx context.Context, obj T) error {
		_, err := update(ctx, obj, updateOptions)
		return err
	}
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
