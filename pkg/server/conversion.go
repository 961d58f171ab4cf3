package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ConversionReview and its parts are the wire form of
// apiextensions.k8s.io/v1 ConversionReview. They are declared here rather
// than imported so that the operator does not depend on
// k8s.io/apiextensions-apiserver (and the API server's code it pulls in) for
// four small structs; test/ checks them against the real types.
type ConversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *ConversionRequest  `json:"request,omitempty"`
	Response        *ConversionResponse `json:"response,omitempty"`
}

// ConversionRequest is apiextensions.k8s.io/v1 ConversionRequest.
type ConversionRequest struct {
	UID               types.UID              `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

// ConversionResponse is apiextensions.k8s.io/v1 ConversionResponse.
type ConversionResponse struct {
	UID              types.UID              `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// ConversionReviewVersion is the only ConversionReview version served; the
// CRD's conversionReviewVersions must list it.
var ConversionReviewVersion = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}

// ServeConversion is the conversion webhook for every kind registered in s,
// replacing controller-runtime's conversion.Webhook. Like that one it relies
// on the scheme's conversion functions between the versions (ours convert
// through v1, the hub), so serving a new version needs no change here.
//
// A malformed review gets a 400 with a message. A review that is well formed
// but names a version or kind the scheme cannot convert gets a response with
// result Failure, which the API server returns to the client as the reason
// its request failed. A failure of one object fails the whole review, as the
// API server requires: it either gets every object converted or none.
func ServeConversion(s *runtime.Scheme) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := readWebhookBody(w, r)
		if !ok {
			return
		}
		review, msg := decodeConversionReview(body)
		if msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		resp := &ConversionResponse{UID: review.Request.UID}
		converted, err := convertAll(s, review.Request)
		if err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			klog.V(2).InfoS("Conversion failed", "uid", review.Request.UID, "to", review.Request.DesiredAPIVersion, "err", err)
		} else {
			resp.Result = metav1.Status{Status: metav1.StatusSuccess}
			resp.ConvertedObjects = converted
		}
		out, err := json.Marshal(&ConversionReview{TypeMeta: review.TypeMeta, Response: resp})
		if err != nil {
			klog.ErrorS(err, "Encoding a ConversionReview response", "uid", review.Request.UID)
			http.Error(w, "internal error: could not encode the response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

func decodeConversionReview(body []byte) (*ConversionReview, string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, "empty body: expected a ConversionReview apiextensions.k8s.io/v1"
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, fmt.Sprintf("body is not a JSON object: %v", err)
	}
	if want := ConversionReviewVersion.WithKind("ConversionReview"); tm.GroupVersionKind() != want {
		msg := fmt.Sprintf("expected kind ConversionReview, apiVersion %s; got kind %q, apiVersion %q", want.GroupVersion(), tm.Kind, tm.APIVersion)
		if tm.Kind == "ConversionReview" {
			msg += ` (set conversionReviewVersions: ["v1"] in the CRD)`
		}
		return nil, msg
	}
	review := &ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil {
		return nil, fmt.Sprintf("decoding ConversionReview: %v", err)
	}
	switch {
	case review.Request == nil:
		return nil, "ConversionReview has no request"
	case review.Request.UID == "":
		return nil, "ConversionReview request has no uid"
	case review.Request.DesiredAPIVersion == "":
		return nil, "ConversionReview request has no desiredAPIVersion"
	}
	return review, ""
}

// convertAll converts every object of req, or none.
func convertAll(s *runtime.Scheme, req *ConversionRequest) (out []runtime.RawExtension, err error) {
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("desiredAPIVersion %q: %w", req.DesiredAPIVersion, err)
	}
	defer func() {
		// A conversion function that panics on one odd object must not take
		// the server down, and the API server must still get an answer.
		if p := recover(); p != nil {
			conversionPanics.Inc()
			klog.ErrorS(fmt.Errorf("panic: %v", p), "Conversion panicked", "uid", req.UID, "stack", string(debug.Stack()))
			out, err = nil, errors.New("internal error: the conversion failed")
		}
	}()
	out = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		obj, err := convertOne(s, raw.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		out = append(out, runtime.RawExtension{Raw: obj})
	}
	return out, nil
}

func convertOne(s *runtime.Scheme, raw []byte, to schema.GroupVersion) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	from := tm.GroupVersionKind()
	if from.Kind == "" || from.Version == "" {
		return nil, errors.New("object has no apiVersion or kind")
	}
	if from.Group != to.Group {
		return nil, fmt.Errorf("cannot convert %s to a different group, %s", from, to)
	}
	if from.GroupVersion() == to {
		// The API server does not ask for this, but the answer is plain.
		return raw, nil
	}
	in, err := s.New(from)
	if err != nil {
		return nil, fmt.Errorf("%s is not served by this webhook: %w", from, err)
	}
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", from, err)
	}
	target := to.WithKind(from.Kind)
	result, err := s.New(target)
	if err != nil {
		return nil, fmt.Errorf("%s is not served by this webhook: %w", target, err)
	}
	if err := s.Convert(in, result, nil); err != nil {
		return nil, fmt.Errorf("converting %s to %s: %w", from, target, err)
	}
	result.GetObjectKind().SetGroupVersionKind(target)
	return json.Marshal(result)
}
