package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every handroll resource.
const GroupName = "handroll.dev"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Kind, Resource and their short forms, spelled once for the controller,
// the RESTMapper, the CRD tests and the webhooks.
const (
	WebAppKind      = "WebApp"
	WebAppListKind  = "WebAppList"
	WebAppResource  = "webapps"
	WebAppShortName = "wa"
)

// Resource returns the GroupResource of a resource in this group, as client-go
// error constructors and listers expect it.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of a kind in this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

var (
	// SchemeBuilder collects the functions that register this package's types
	// and defaulting functions. It registers nothing by itself: nothing in this
	// package runs from init().
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults)

	// AddToScheme registers WebApp and WebAppList, and their defaulters, in s.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
