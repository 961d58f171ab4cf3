// Package v1 is version v1 of the handroll.dev API: the WebApp resource, in
// its storage version. It is the conversion hub for older versions.
//
// Manager piece replaced: the types half of Options.Scheme. Where a
// controller-runtime project registers its types from init() into a global
// scheme, this package only exposes AddToScheme; pkg/apis/scheme decides,
// explicitly, which schemes it goes into.
//
// Defaults (defaults.go) and field-level validation (validation.go) live with
// the types so that the CRD schema markers, the admission webhooks and the
// reconciler all agree on one definition.
//
// +k8s:deepcopy-gen=package
// +k8s:defaulter-gen=TypeMeta
// +groupName=handroll.dev
package v1
