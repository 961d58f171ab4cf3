package certs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"reflect"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// FieldManager is the field manager of every write to the webhook
// configurations and the CRDs: the operator's, as its reconciles' are.
const FieldManager = "handroll"

var updateOptions = metav1.UpdateOptions{FieldManager: FieldManager}

// crdResource is reached through the dynamic client: the main module does
// not depend on k8s.io/apiextensions-apiserver for one nested field.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// injection is what every clientConfig of the targets gets.
type injection struct {
	bundle []byte // PEM, the Secret's ca.crt
	url    string // Options.URL; "" keeps each webhook clientConfig's service or url
	// service is what a CRD's conversion calls without a URL: the Service
	// this process serves behind. nil leaves the CRD's service or url.
	service map[string]any
	records records
}

// apply sets cc's caBundle and, with a URL, replaces its service by
// url = URL + the service's path (or the path of the url it has). It
// reports whether cc changed.
func (in injection) apply(cc *admissionregistrationv1.WebhookClientConfig) bool {
	changed := false
	if !bytes.Equal(cc.CABundle, in.bundle) {
		cc.CABundle = bytes.Clone(in.bundle)
		changed = true
	}
	if in.url != "" {
		var path string
		switch {
		case cc.Service != nil && cc.Service.Path != nil:
			path = *cc.Service.Path
		case cc.Service == nil && cc.URL != nil:
			path = urlPath(*cc.URL)
		}
		want := in.url + path
		if cc.Service != nil || cc.URL == nil || *cc.URL != want {
			cc.Service, cc.URL = nil, &want
			changed = true
		}
	}
	return changed
}

// applyCRD does what apply does to spec.conversion.webhook.clientConfig of
// a CRD, whose caBundle is base64 in JSON, and without a URL points it at
// in.service: the CRD may have been applied apart from the operator (GitOps,
// make install) with a namespace the operator does not run in, and then
// no v1alpha1 WebApp could be read or written. ok is false when the CRD's
// conversion strategy is not Webhook: the API server calls no conversion
// webhook for it, so there is nothing to inject.
func (in injection) applyCRD(crd *unstructured.Unstructured) (changed, ok bool, err error) {
	strategy, _, err := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if err != nil || strategy != "Webhook" {
		return false, false, err
	}
	cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
	if err != nil {
		return false, true, err
	}
	if cc == nil {
		cc = map[string]any{}
	}
	if bundle := base64.StdEncoding.EncodeToString(in.bundle); cc["caBundle"] != bundle {
		cc["caBundle"] = bundle
		changed = true
	}
	switch {
	case in.url != "":
		var path string
		svc, hasService := cc["service"].(map[string]any)
		existing, hasURL := cc["url"].(string)
		switch {
		case hasService:
			path, _ = svc["path"].(string)
		case hasURL:
			path = urlPath(existing)
		}
		if want := in.url + path; hasService || existing != want {
			delete(cc, "service")
			cc["url"] = want
			changed = true
		}
	case in.service != nil:
		// All four fields, as the manifests write them and the API server
		// returns them: equal values, so no apply sees a conflict.
		if _, hasURL := cc["url"]; hasURL || !reflect.DeepEqual(cc["service"], in.service) {
			delete(cc, "url")
			cc["service"] = runtime.DeepCopyJSONValue(in.service)
			changed = true
		}
	}
	if !changed {
		return false, true, nil
	}
	return true, true, unstructured.SetNestedMap(crd.Object, cc, "spec", "conversion", "webhook", "clientConfig")
}

// urlPath is the escaped path of a webhook URL, "" if it does not parse.
func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.EscapedPath()
}

// outcome is what an injection pass found for one target.
type outcome string

const (
	current    outcome = "current"                // held the bundle already: no write
	updated    outcome = "updated"                // written
	absent     outcome = "not found"              // nothing to inject into yet
	notWebhook outcome = "conversion not Webhook" // a CRD that calls no webhook
)

// target is one object that gets the bundle.
type target struct {
	kind, name string
	// sync injects in into the object. It calls beforeWrite before an
	// update and gives up if that fails.
	sync syncFunc
}

func (t target) String() string { return t.kind + "/" + t.name }

// targets lists what the options name: each webhook configuration name as
// both kinds, then the CRDs, then the CA ConfigMap.
func (m *Manager) targets() []target {
	var out []target
	for _, name := range m.opts.WebhookConfigurations {
		out = append(out,
			target{kind: "MutatingWebhookConfiguration", name: name, sync: m.syncMutating(name)},
			target{kind: "ValidatingWebhookConfiguration", name: name, sync: m.syncValidating(name)})
	}
	for _, name := range m.opts.CRDs {
		out = append(out, target{kind: "CustomResourceDefinition", name: name, sync: m.syncCRD(name)})
	}
	if name := m.opts.CAConfigMap; name != "" {
		out = append(out, target{kind: "ConfigMap", name: name, sync: m.syncCAConfigMap(name)})
	}
	return out
}

type syncFunc func(ctx context.Context, in injection, beforeWrite func(context.Context) error) (outcome, error)

// syncWith makes a target's sync out of how to read, change and write its
// object. It reads the object, changes it in memory, and writes it only if
// something changed; a conflict (someone else wrote it, another replica
// injecting the same bundle among them) reads it again. change returns
// updated when it changed the object.
func syncWith[T any](
	get func(context.Context) (T, error),
	change func(T, injection) (outcome, error),
	update func(context.Context, T) error,
) syncFunc {
	return func(ctx context.Context, in injection, beforeWrite func(context.Context) error) (outcome, error) {
		var result outcome
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := get(ctx)
			if apierrors.IsNotFound(err) {
				result = absent
				return nil
			} else if err != nil {
				return err
			}
			if result, err = change(obj, in); err != nil || result != updated {
				return err
			}
			if err := beforeWrite(ctx); err != nil {
				return err
			}
			return update(ctx, obj)
		})
		return result, err
	}
}

func changed(c bool) outcome {
	if c {
		return updated
	}
	return current
}

func (m *Manager) syncMutating(name string) syncFunc {
	client := m.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return syncWith(
		func(ctx context.Context) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		func(obj *admissionregistrationv1.MutatingWebhookConfiguration, in injection) (outcome, error) {
			names, ccs := mutatingClientConfigs(obj)
			c, err := in.webhookRecords("MutatingWebhookConfiguration/"+name, obj, names, ccs)
			if err != nil {
				return "", err
			}
			for i := range obj.Webhooks {
				c = in.apply(&obj.Webhooks[i].ClientConfig) || c
			}
			return changed(c), nil
		},
		func(ctx context.Context, obj *admissionregistrationv1.MutatingWebhookConfiguration) error {
			_, err := client.Update(ctx, obj, updateOptions)
			return err
		})
}

func (m *Manager) syncValidating(name string) syncFunc {
	client := m.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	return syncWith(
		func(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		func(obj *admissionregistrationv1.ValidatingWebhookConfiguration, in injection) (outcome, error) {
			names, ccs := validatingClientConfigs(obj)
			c, err := in.webhookRecords("ValidatingWebhookConfiguration/"+name, obj, names, ccs)
			if err != nil {
				return "", err
			}
			for i := range obj.Webhooks {
				c = in.apply(&obj.Webhooks[i].ClientConfig) || c
			}
			return changed(c), nil
		},
		func(ctx context.Context, obj *admissionregistrationv1.ValidatingWebhookConfiguration) error {
			_, err := client.Update(ctx, obj, updateOptions)
			return err
		})
}

func (m *Manager) syncCRD(name string) syncFunc {
	client := m.dyn.Resource(crdResource)
	return syncWith(
		func(ctx context.Context) (*unstructured.Unstructured, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		func(obj *unstructured.Unstructured, in injection) (outcome, error) {
			if strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy"); strategy != "Webhook" {
				return notWebhook, nil
			}
			recorded, err := in.crdRecords("CustomResourceDefinition/"+name, obj)
			if err != nil {
				return "", err
			}
			if _, ok := obj.GetAnnotations()[AnnotationReplacedClientConfigs]; ok {
				// A run at a URL that still renews its record: its URL
				// stays until it restores the service (or goes stale).
				in.service = nil
			}
			c, ok, err := in.applyCRD(obj)
			switch {
			case err != nil:
				return "", fmt.Errorf("reading spec.conversion: %w", err)
			case !ok:
				return notWebhook, nil
			}
			return changed(c || recorded), nil
		},
		func(ctx context.Context, obj *unstructured.Unstructured) error {
			_, err := client.Update(ctx, obj, updateOptions)
			return err
		})
}

// errStaleSecret stops an injection pass whose Secret is older than the
// one stored: writing its bundle could take a new CA out of an object that
// another replica has just put it into.
var errStaleSecret = errors.New("the cached Secret is older than the stored one; injecting once the watch delivers it")
