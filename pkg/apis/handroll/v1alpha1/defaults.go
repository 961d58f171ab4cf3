package v1alpha1

// SetDefaults_WebAppSpec fills the fields a user may leave out, with v1's
// values. The same values are CRD schema defaults of this version (see the
// markers in types.go); these functions serve tests and objects built in Go.
//
// defaulter-gen finds this function by name and wires it into
// RegisterDefaults, which AddToScheme installs.
func SetDefaults_WebAppSpec(spec *WebAppSpec) {
	if spec.Size == nil {
		s := DefaultSize
		spec.Size = &s
	}
	if spec.ContainerPort == 0 {
		spec.ContainerPort = DefaultContainerPort
	}
}
