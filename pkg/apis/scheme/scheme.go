package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
)

// adders are every group handroll reads or writes: the built-in groups
// (Deployments, Services, ConfigMaps, Events, Leases, ...) and handroll.dev,
// whose v1alpha1 also brings its conversions to and from v1 for the
// conversion webhook.
var adders = []func(*runtime.Scheme) error{
	clientgoscheme.AddToScheme,
	handrollv1.AddToScheme,
	handrollv1alpha1.AddToScheme,
}

// New returns a new scheme holding the built-in Kubernetes types and the
// handroll types, with their defaulting functions. Each call builds a fresh
// scheme; nothing global is touched.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range adders {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Codecs returns the serializers for s, for decoding admission and
// conversion requests and encoding objects.
func Codecs(s *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}

// KindFor returns the one GroupVersionKind of obj in s. Where
// runtime.Scheme answers an unregistered type with a terse "no kind is
// registered", KindFor says which type and what to do about it.
func KindFor(s *runtime.Scheme, obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := s.ObjectKinds(obj)
	if runtime.IsNotRegisteredError(err) {
		return schema.GroupVersionKind{}, fmt.Errorf(
			"type %T is not registered in handroll's scheme: add its group's AddToScheme to the adders in pkg/apis/scheme: %w", obj, err)
	}
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	if len(gvks) != 1 {
		return schema.GroupVersionKind{}, fmt.Errorf("type %T is registered under %d kinds %v; expected one", obj, len(gvks), gvks)
	}
	return gvks[0], nil
}

// NewObject returns an empty object of the given kind, or an error naming the
// kind when s does not know it.
func NewObject(s *runtime.Scheme, gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := s.New(gvk)
	if runtime.IsNotRegisteredError(err) {
		return nil, fmt.Errorf("kind %s is not registered in handroll's scheme: add its group's AddToScheme to the adders in pkg/apis/scheme: %w", gvk, err)
	}
	return obj, err
}
