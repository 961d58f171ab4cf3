package v1alpha1

// SetDefaults_WebAppSpec fills the fields a user left out, with v1's
// values. The same values are CRD schema defaults of this version (see the
// markers in types.go); these functions serve tests and objects built in Go.
// As in v1, only an absent (nil) field gets its default: an explicit
// containerPort 0 is kept for validation to refuse.
//
// defaulter-gen finds this function by name and wires it into
// RegisterDefaults, which AddToScheme installs.
func SetDefaults_WebAppSpec(spec *WebAppSpec) {
	if spec.Size == nil {
		s := DefaultSize
		spec.Size = &s
	}
	if spec.ContainerPort == nil {
		p := DefaultContainerPort
		spec.ContainerPort = &p
	}
}
