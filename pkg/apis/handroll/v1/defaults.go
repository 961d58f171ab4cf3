package v1

// SetDefaults_WebAppSpec fills the fields a user may leave out. The same
// values are CRD schema defaults (see the markers in types.go), so an object
// read from the API server is already defaulted; these functions serve the
// mutating webhook, tests and objects built in Go.
//
// defaulter-gen finds these functions by name and wires them into
// RegisterDefaults, which AddToScheme installs.
func SetDefaults_WebAppSpec(spec *WebAppSpec) {
	if spec.Replicas == nil {
		r := DefaultReplicas
		spec.Replicas = &r
	}
	if spec.Port == 0 {
		spec.Port = DefaultPort
	}
	if spec.Service == nil {
		spec.Service = &WebAppService{}
	}
}

// SetDefaults_WebAppService defaults the Service shape.
func SetDefaults_WebAppService(svc *WebAppService) {
	if svc.Type == "" {
		svc.Type = ServiceTypeClusterIP
	}
	if svc.Port == 0 {
		svc.Port = DefaultServicePort
	}
}
