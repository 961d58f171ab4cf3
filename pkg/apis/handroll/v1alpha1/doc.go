// Package v1alpha1 is version v1alpha1 of the handroll.dev API: an older
// shape of WebApp that the API server still serves but never stores.
//
// v1 (pkg/apis/handroll/v1) is the storage version and the conversion hub.
// v1alpha1 names three spec fields differently (size, containerPort and
// configData for v1's replicas, port and config) and has no configMapRef or
// service; conversion.go converts both ways without losing anything, keeping
// the v1 fields v1alpha1 cannot hold in the handroll.dev/v1-spec annotation.
// As with generated conversions, a converted object shares maps, slices and
// pointers with its source (only annotations are copied before they change):
// DeepCopy a cached object before converting it to change the result.
//
// Manager piece replaced: controller-runtime's conversion.Hub and
// conversion.Convertible (ConvertTo and ConvertFrom methods on each older
// type). Here the conversions are functions registered in the scheme, as
// Kubernetes' own API versions do it, and the conversion webhook converts
// with the scheme's Convert.
//
// Validation is v1's: the admission webhooks are registered for v1 with
// matchPolicy Equivalent, so the API server converts a v1alpha1 request to v1
// before it calls them. The CRD schema of this version repeats v1's
// structural limits.
//
// +k8s:deepcopy-gen=package
// +k8s:defaulter-gen=TypeMeta
// +k8s:conversion-gen=github.com/handroll/handroll/pkg/apis/handroll/v1
// +groupName=handroll.dev
package v1alpha1
