package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/conversion"
	kjson "sigs.k8s.io/json"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// V1SpecAnnotation is the annotation on a v1alpha1 WebApp that carries, as
// JSON, the fields of the v1 spec that v1alpha1 has no place for
// (spec.configMapRef and spec.service), so that a v1alpha1 client reading
// and writing back an object does not erase them.
//
// Conversion owns this key: converting to v1 consumes it, and converting from
// v1 writes it when there is something to carry and otherwise leaves it out,
// replacing whatever a v1 object might hold under the same key.
const V1SpecAnnotation = handrollv1.V1SpecAnnotation

// v1OnlySpec is the value of V1SpecAnnotation: every field of
// handrollv1.WebAppSpec that WebAppSpec lacks, with v1's JSON names. A field
// added to v1 that v1alpha1 cannot hold belongs here.
type v1OnlySpec struct {
	ConfigMapRef *handrollv1.ConfigMapReference `json:"configMapRef,omitempty"`
	Service      *handrollv1.WebAppService      `json:"service,omitempty"`
}

func (s *v1OnlySpec) isEmpty() bool { return *s == v1OnlySpec{} }

// marshalV1OnlySpec returns the annotation value for s. encoding/json writes
// struct fields in declaration order, so equal values give equal strings and
// a round trip through v1 leaves the annotation byte for byte as it was.
func marshalV1OnlySpec(s *v1OnlySpec) (string, error) {
	data, err := json.Marshal(s)
	return string(data), err
}

// unmarshalV1OnlySpec decodes an annotation value as the API server decodes
// an object: field names are case-sensitive, and an unknown or repeated
// field is an error rather than a value silently dropped.
func unmarshalV1OnlySpec(value string) (v1OnlySpec, error) {
	var s v1OnlySpec
	strict, err := kjson.UnmarshalStrict([]byte(value), &s)
	if err != nil {
		return v1OnlySpec{}, err
	}
	if len(strict) > 0 {
		return v1OnlySpec{}, errors.Join(strict...)
	}
	return s, nil
}

// Convert_v1alpha1_WebApp_To_v1_WebApp converts a v1alpha1 WebApp to v1 and
// restores the v1-only fields from V1SpecAnnotation, which it drops.
// A value that does not decode is an error: converting without it would
// lose the fields it holds.
func Convert_v1alpha1_WebApp_To_v1_WebApp(in *WebApp, out *handrollv1.WebApp, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_WebApp_To_v1_WebApp(in, out, s); err != nil {
		return err
	}
	value, ok := in.Annotations[V1SpecAnnotation]
	if !ok {
		return nil
	}
	only, err := unmarshalV1OnlySpec(value)
	if err != nil {
		return fmt.Errorf("converting WebApp %s/%s to %s: annotation %s does not hold the v1-only spec fields as JSON: %w",
			in.Namespace, in.Name, handrollv1.SchemeGroupVersion, V1SpecAnnotation, err)
	}
	// out.ObjectMeta shares in's map: change a copy.
	out.Annotations = maps.Clone(in.Annotations)
	delete(out.Annotations, V1SpecAnnotation)
	out.Spec.ConfigMapRef = only.ConfigMapRef
	out.Spec.Service = only.Service
	return nil
}

// Convert_v1_WebApp_To_v1alpha1_WebApp converts a v1 WebApp to v1alpha1 and
// keeps the fields v1alpha1 cannot hold in V1SpecAnnotation.
func Convert_v1_WebApp_To_v1alpha1_WebApp(in *handrollv1.WebApp, out *WebApp, s conversion.Scope) error {
	if err := autoConvert_v1_WebApp_To_v1alpha1_WebApp(in, out, s); err != nil {
		return err
	}
	only := v1OnlySpec{ConfigMapRef: in.Spec.ConfigMapRef, Service: in.Spec.Service}
	_, stale := in.Annotations[V1SpecAnnotation]
	if only.isEmpty() && !stale {
		return nil
	}
	// out.ObjectMeta shares in's map: change a copy. A value a v1 object
	// holds under the key is not ours and would be read back as if it were.
	out.Annotations = maps.Clone(in.Annotations)
	delete(out.Annotations, V1SpecAnnotation)
	if only.isEmpty() {
		return nil
	}
	value, err := marshalV1OnlySpec(&only)
	if err != nil {
		return fmt.Errorf("converting WebApp %s/%s to %s: encoding annotation %s: %w",
			in.Namespace, in.Name, SchemeGroupVersion, V1SpecAnnotation, err)
	}
	if out.Annotations == nil {
		out.Annotations = make(map[string]string, 1)
	}
	out.Annotations[V1SpecAnnotation] = value
	return nil
}

// Convert_v1alpha1_WebAppSpec_To_v1_WebAppSpec converts the fields the two
// specs share, under their v1 names. spec.configMapRef and spec.service are
// left empty: only the WebApp conversion, which sees the annotations, can
// restore them.
func Convert_v1alpha1_WebAppSpec_To_v1_WebAppSpec(in *WebAppSpec, out *handrollv1.WebAppSpec, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_WebAppSpec_To_v1_WebAppSpec(in, out, s); err != nil {
		return err
	}
	out.Replicas = in.Size
	out.Port = in.ContainerPort
	out.Config = in.ConfigData
	out.ConfigMapRef = nil
	out.Service = nil
	return nil
}

// Convert_v1_WebAppSpec_To_v1alpha1_WebAppSpec converts the fields the two
// specs share, under their v1alpha1 names. On its own it drops
// spec.configMapRef and spec.service; the WebApp conversion keeps them in
// V1SpecAnnotation.
func Convert_v1_WebAppSpec_To_v1alpha1_WebAppSpec(in *handrollv1.WebAppSpec, out *WebAppSpec, s conversion.Scope) error {
	if err := autoConvert_v1_WebAppSpec_To_v1alpha1_WebAppSpec(in, out, s); err != nil {
		return err
	}
	out.Size = in.Replicas
	out.ContainerPort = in.Port
	out.ConfigData = in.Config
	return nil
}
