package v1

// SetDefaults_WebAppSpec fills the fields a user left out. The same values
// are CRD schema defaults (see the markers in types.go), so an object read
// from the API server is already defaulted; these functions serve the
// mutating webhook, tests and objects built in Go.
//
// A default applies only to a field that is absent. Every optional field
// with a default is a pointer, so that absent (nil) and given (a zero value
// among them) differ: an explicit port 0 or service type "" is kept, for
// validation to refuse, rather than silently replaced.
//
// defaulter-gen finds these functions by name and wires them into
// RegisterDefaults, which AddToScheme installs.
func SetDefaults_WebAppSpec(spec *WebAppSpec) {
	if spec.Replicas == nil {
		r := DefaultReplicas
		spec.Replicas = &r
	}
	if spec.Port == nil {
		p := DefaultPort
		spec.Port = &p
	}
	if spec.Service == nil {
		spec.Service = &WebAppService{}
	}
}

// SetDefaults_WebAppService defaults the Service shape.
func SetDefaults_WebAppService(svc *WebAppService) {
	if svc.Type == nil {
		t := ServiceTypeClusterIP
		svc.Type = &t
	}
	if svc.Port == nil {
		p := DefaultServicePort
		svc.Port = &p
	}
}
