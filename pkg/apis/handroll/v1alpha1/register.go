package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// GroupName is the API group of every handroll resource.
const GroupName = handrollv1.GroupName

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

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
	// SchemeBuilder collects the functions that register this package's
	// types, their defaulters and their conversions to and from v1 in a
	// scheme. It registers nothing by itself: nothing in this package runs
	// from init().
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults, RegisterConversions)

	// AddToScheme registers WebApp and WebAppList, their defaulters and their
	// conversions to and from handroll.dev/v1 in s.
	AddToScheme = SchemeBuilder.AddToScheme

	// localSchemeBuilder is where conversion-gen's output registers
	// RegisterConversions from its init(). SchemeBuilder lists that function
	// itself, so this builder is never used.
	localSchemeBuilder runtime.SchemeBuilder
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
