package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/pkg/server"
)

// The paths of the two webhooks, in kubebuilder's naming scheme
// (/mutate-<group with dashes>-<version>-<kind>), so that manifests written
// for a controller-runtime operator fit unchanged.
const (
	DefaulterPath = "/mutate-handroll-dev-v1-webapp"
	ValidatorPath = "/validate-handroll-dev-v1-webapp"
)

// Register installs the Defaulter and the Validator on mux at their paths.
func Register(mux *server.WebhookMux, s *runtime.Scheme) {
	mux.Handle(DefaulterPath, server.ServeAdmission(NewDefaulter(s).Review))
	mux.Handle(ValidatorPath, server.ServeAdmission(NewValidator(s).Review))
}

var (
	webAppKind     = metav1.GroupVersionKind(handrollv1.SchemeGroupVersion.WithKind(handrollv1.WebAppKind))
	webAppResource = metav1.GroupVersionResource(handrollv1.SchemeGroupVersion.WithResource(handrollv1.WebAppResource))
)

// decoder turns request.object into a WebApp. It is admission.Decoder for
// one kind: the scheme's universal deserializer, which neither converts nor
// defaults, so the defaulter sees exactly what the user sent.
type decoder struct{ d runtime.Decoder }

func newDecoder(s *runtime.Scheme) decoder {
	return decoder{d: scheme.Codecs(s).UniversalDeserializer()}
}

// target checks that the request is about handroll.dev/v1 webapps. It
// returns a response to send when the webhook should not look further: an
// allow for a subresource, a 400 denial for anything not a WebApp.
func target(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != webAppResource {
		return denied(http.StatusBadRequest, "this webhook admits %s, not resource %s: check the rules of the webhook configuration",
			gvrString(webAppResource), gvrString(req.Resource))
	}
	// A status update cannot change what is validated or defaulted (name and
	// spec), and a scale request carries an autoscaling/v1 Scale, whose
	// replicas the CRD schema bounds. The configuration's rules should name
	// only "webapps"; this keeps a broader rule from blocking the controller.
	if req.SubResource != "" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if req.Kind != webAppKind {
		return denied(http.StatusBadRequest, "this webhook admits %s, not kind %s", gvkString(webAppKind), gvkString(req.Kind))
	}
	return nil
}

// decode returns the WebApp in raw, or a 400 denial saying why there is none.
func (d decoder) decode(raw []byte, which string) (*handrollv1.WebApp, *admissionv1.AdmissionResponse) {
	if len(raw) == 0 {
		return nil, denied(http.StatusBadRequest, "request.%s is empty", which)
	}
	obj, gvk, err := d.d.Decode(raw, nil, &handrollv1.WebApp{})
	// Unknown fields are a strict-decoding error with the object still
	// filled in. They mean the CRD is newer than this binary (the API server
	// prunes anything the schema does not know before admission), which
	// must not block every write during a rolling upgrade.
	if err != nil && !runtime.IsStrictDecodingError(err) {
		return nil, denied(http.StatusBadRequest, "decoding request.%s as a WebApp: %v", which, err)
	}
	w, ok := obj.(*handrollv1.WebApp)
	if !ok || gvk == nil || *gvk != handrollv1.SchemeGroupVersion.WithKind(handrollv1.WebAppKind) {
		return nil, denied(http.StatusBadRequest, "request.%s is %s, not %s", which, gvkOf(gvk), gvkString(webAppKind))
	}
	if err != nil {
		klog.V(2).InfoS("WebApp in an admission request has fields this build does not know", "err", err)
	}
	return w, nil
}

// Defaulter is the mutating webhook: it fills in what a WebApp leaves out
// (handrollv1.SetObjectDefaults_WebApp) and answers with the JSON Patch from
// the object sent to the defaulted one. It replaces a
// webhook.CustomDefaulter. The API server applies the CRD schema's
// defaults, the same values, before admission and again after a mutating
// patch, so most requests arrive with nothing left to fill; the webhook
// fills what is still absent before the validating webhooks see it. Only a
// field left out is filled: every optional field with a default is a
// pointer, so an explicit port 0 stays 0, for validation to refuse.
type Defaulter struct{ decoder decoder }

// NewDefaulter returns a Defaulter decoding with s, which must hold
// handroll.dev/v1.
func NewDefaulter(s *runtime.Scheme) *Defaulter { return &Defaulter{decoder: newDecoder(s)} }

// Review is the review function for server.ServeAdmission.
func (d *Defaulter) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if resp := target(req); resp != nil {
		return resp
	}
	w, resp := d.decoder.decode(req.Object.Raw, "object")
	if resp != nil {
		return resp
	}
	defaulted := w.DeepCopy()
	handrollv1.SetObjectDefaults_WebApp(defaulted)
	patch, err := defaultingPatch(req.Object.Raw, w, defaulted)
	if err != nil {
		return denied(http.StatusInternalServerError, "computing the defaulting patch: %v", err)
	}
	if len(patch) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return denied(http.StatusInternalServerError, "encoding the defaulting patch: %v", err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: body, PatchType: &pt}
}

// defaultingPatch diffs the raw object, as sent, against the defaulted
// object, and keeps only operations at locations that defaulting changed.
//
// Diffing raw JSON against a Go type's encoding also finds differences that
// are only encoding: fields the Go type does not know (they would be
// removed), "creationTimestamp": null added, a quantity "0.1" rewritten as
// "100m". Those locations encode the same before and after defaulting, so
// comparing the undefaulted and defaulted encodings at each operation's path
// tells them apart. controller-runtime drops every "remove" for the first
// reason; this drops the other two as well.
func defaultingPatch(raw []byte, before, after *handrollv1.WebApp) ([]jsonpatch.Operation, error) {
	beforeJSON, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	afterJSON, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(raw, afterJSON)
	if err != nil {
		return nil, err
	}
	beforeDoc, err := decodeJSON(beforeJSON)
	if err != nil {
		return nil, err
	}
	afterDoc, err := decodeJSON(afterJSON)
	if err != nil {
		return nil, err
	}
	kept := ops[:0]
	for _, op := range ops {
		b, inBefore := lookupPointer(beforeDoc, op.Path)
		a, inAfter := lookupPointer(afterDoc, op.Path)
		// Absent and null mean the same to the API server.
		if (!inBefore || b == nil) && (!inAfter || a == nil) {
			continue
		}
		if inBefore && inAfter && reflect.DeepEqual(a, b) {
			continue
		}
		kept = append(kept, op)
	}
	return kept, nil
}

// Validator is the validating webhook: on CREATE and UPDATE it runs
// handrollv1.ValidateWebApp and denies with every error and its field path,
// shaped as the API server's own 422 Invalid (status.details.causes carry
// the paths, so kubectl prints them). Allowed objects may get warnings about
// choices that are legal but unwise. DELETE and CONNECT are allowed. It
// replaces a webhook.CustomValidator.
type Validator struct{ decoder decoder }

// NewValidator returns a Validator decoding with s, which must hold
// handroll.dev/v1.
func NewValidator(s *runtime.Scheme) *Validator { return &Validator{decoder: newDecoder(s)} }

// Review is the review function for server.ServeAdmission.
func (v *Validator) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if resp := target(req); resp != nil {
		return resp
	}
	w, resp := v.decoder.decode(req.Object.Raw, "object")
	if resp != nil {
		return resp
	}
	// Validating webhooks run after defaulting (the CRD's and the
	// Defaulter's); defaulting again makes the answer the same when the
	// Defaulter is not installed.
	handrollv1.SetObjectDefaults_WebApp(w)
	warnings := Warnings(w)
	if errs := handrollv1.ValidateWebApp(w); len(errs) > 0 {
		name := w.Name
		if name == "" {
			name = w.GenerateName
		}
		st := apierrors.NewInvalid(handrollv1.Kind(handrollv1.WebAppKind), name, errs).ErrStatus
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &st, Warnings: warnings}
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// secretLikeEnvNames are parts of an environment variable name that suggest
// its value is a credential.
var secretLikeEnvNames = []string{"PASSWORD", "PASSWD", "TOKEN", "SECRET", "API_KEY", "APIKEY", "PRIVATE_KEY"}

// Warnings lists what is allowed but probably a mistake, each with its field
// path, for AdmissionResponse.Warnings (kubectl prints them as "Warning: ").
// Each stays well under the 256 characters after which the API server may
// truncate a warning, and none repeats a value that might be a secret.
func Warnings(w *handrollv1.WebApp) []string {
	var out []string
	if msg := imageTagWarning(w.Spec.Image); msg != "" {
		out = append(out, msg)
	}
	if r := w.Spec.Replicas; r != nil && *r == 0 {
		out = append(out, "spec.replicas: 0: the WebApp is scaled to zero and no pods will run")
	}
	// A container with limits but no requests gets requests equal to its
	// limits, so only a container with neither is left without.
	if len(w.Spec.Resources.Requests) == 0 && len(w.Spec.Resources.Limits) == 0 {
		out = append(out, "spec.resources: no requests: pods are scheduled as if they used nothing and are evicted first; set requests.cpu and requests.memory")
	}
	for i, e := range w.Spec.Env {
		if e.Value == "" {
			continue
		}
		upper := strings.ToUpper(e.Name)
		for _, s := range secretLikeEnvNames {
			if strings.Contains(upper, s) {
				out = append(out, fmt.Sprintf("spec.env[%d].value: %s looks like a secret in plain text, readable by anyone who can read the WebApp; use valueFrom.secretKeyRef", i, e.Name))
				break
			}
		}
	}
	return out
}

// imageTagWarning warns about an image that names no fixed version: no tag
// (which means latest) or the tag latest. A digest pins the image whatever
// the tag says.
func imageTagWarning(image string) string {
	if image == "" || strings.Contains(image, "@") {
		return ""
	}
	last := image[strings.LastIndex(image, "/")+1:] // a registry port is before the last "/"
	_, tag, hasTag := strings.Cut(last, ":")
	switch {
	case !hasTag:
		return fmt.Sprintf("spec.image: %q has no tag, so pods run whatever latest is when pulled; pin a tag or digest", image)
	case tag == "latest":
		return fmt.Sprintf("spec.image: %q uses the tag latest, so pods run whatever it is when pulled; pin a tag or digest", image)
	}
	return ""
}

func denied(code int32, format string, args ...any) *admissionv1.AdmissionResponse {
	reason := metav1.StatusReasonBadRequest
	if code == http.StatusInternalServerError {
		reason = metav1.StatusReasonInternalError
	}
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    code,
			Reason:  reason,
			Message: fmt.Sprintf(format, args...),
		},
	}
}

func gvkString(k metav1.GroupVersionKind) string {
	if k.Group == "" {
		return k.Version + " " + k.Kind
	}
	return k.Group + "/" + k.Version + " " + k.Kind
}

func gvrString(r metav1.GroupVersionResource) string {
	if r.Group == "" {
		return r.Version + " " + r.Resource
	}
	return r.Group + "/" + r.Version + " " + r.Resource
}

func gvkOf(gvk *schema.GroupVersionKind) string {
	if gvk == nil || gvk.Empty() {
		return "an object without apiVersion and kind"
	}
	return gvkString(metav1.GroupVersionKind(*gvk))
}
