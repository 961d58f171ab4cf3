package v1

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReservedEnvPrefix starts the names of environment variables that handroll
// sets in every pod; a WebApp may not set them itself.
const ReservedEnvPrefix = "HANDROLL_"

// MaxConfigBytes bounds spec.config: it is rendered into one ConfigMap, and
// the API server refuses a ConfigMap whose data exceeds 1 MiB.
const MaxConfigBytes = 1 << 20

// V1SpecAnnotation is where a handroll.dev/v1alpha1 WebApp carries the v1
// fields it has no place for (see the v1alpha1 conversions). It is never
// stored on a v1 object.
const V1SpecAnnotation = "handroll.dev/v1-spec"

// ValidateWebApp checks a WebApp field by field and returns every problem,
// each with its field path. It checks what the CRD schema checks and what a
// schema cannot express (image grammar, reserved names, total config size),
// so that an admission webhook gives one complete answer and Go callers need
// no API server to know an object is valid. Call it on a defaulted object.
func ValidateWebApp(w *WebApp) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(w.Name, field.NewPath("metadata", "name"))...)
	if _, ok := w.Annotations[V1SpecAnnotation]; ok {
		// Conversion consumes it before a v1 object is stored; one set on v1
		// would be replaced by the next read through v1alpha1, losing data.
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(V1SpecAnnotation),
			"reserved for converting v1alpha1 WebApps; a v1 WebApp holds these fields in spec"))
	}
	errs = append(errs, ValidateWebAppSpec(&w.Spec, w.Name, field.NewPath("spec"))...)
	return errs
}

func validateName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return nil // generateName objects are named by the API server
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(p, name, msg+" (the name is also the Service's name)"))
	}
	return errs
}

// ValidateWebAppSpec checks a spec; name is the WebApp's name, used to check
// that spec.configMapRef does not point at the ConfigMap handroll owns.
func ValidateWebAppSpec(spec *WebAppSpec, name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList

	if spec.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), "the container image to run, for example nginx:1.27"))
	} else if len(spec.Image) > MaxImageLength {
		errs = append(errs, field.TooLong(p.Child("image"), "", MaxImageLength))
	} else if err := ValidateImageReference(spec.Image); err != nil {
		errs = append(errs, field.Invalid(p.Child("image"), spec.Image, err.Error()))
	}

	if spec.Replicas != nil && (*spec.Replicas < MinReplicas || *spec.Replicas > MaxReplicas) {
		errs = append(errs, field.Invalid(p.Child("replicas"), *spec.Replicas,
			fmt.Sprintf("must be between %d and %d", MinReplicas, MaxReplicas)))
	}
	if spec.Port != nil {
		errs = append(errs, validatePort(*spec.Port, p.Child("port"))...)
	}
	errs = append(errs, validateEnv(spec.Env, p.Child("env"))...)
	errs = append(errs, validateResources(&spec.Resources, p.Child("resources"))...)
	errs = append(errs, validateConfig(spec.Config, p.Child("config"))...)

	if ref := spec.ConfigMapRef; ref != nil {
		rp := p.Child("configMapRef", "name")
		switch {
		case ref.Name == "":
			errs = append(errs, field.Required(rp, "the name of a ConfigMap in the WebApp's namespace"))
		case name != "" && ref.Name == OwnedConfigMapName(name):
			errs = append(errs, field.Invalid(rp, ref.Name,
				"must not be <name>-config: that ConfigMap is owned by handroll and rendered from spec.config"))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
				errs = append(errs, field.Invalid(rp, ref.Name, msg))
			}
		}
	}

	if svc := spec.Service; svc != nil {
		sp := p.Child("service")
		if svc.Type != nil {
			switch *svc.Type {
			case ServiceTypeClusterIP, ServiceTypeNodePort:
			default:
				errs = append(errs, field.NotSupported(sp.Child("type"), *svc.Type,
					[]ServiceType{ServiceTypeClusterIP, ServiceTypeNodePort}))
			}
		}
		if svc.Port != nil {
			errs = append(errs, validatePort(*svc.Port, sp.Child("port"))...)
		}
		if svc.NodePort != 0 {
			if svc.Type == nil || *svc.Type != ServiceTypeNodePort {
				errs = append(errs, field.Forbidden(sp.Child("nodePort"), "may only be set when type is NodePort"))
			} else if svc.NodePort < MinNodePort || svc.NodePort > MaxNodePort {
				errs = append(errs, field.Invalid(sp.Child("nodePort"), svc.NodePort,
					fmt.Sprintf("must be between %d and %d", MinNodePort, MaxNodePort)))
			}
		}
	}
	return errs
}

// validatePort checks a port that was given: 0 is refused like any other
// number out of range (a port left out is nil, and defaulted).
func validatePort(port int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(p, port, msg))
	}
	return errs
}

func validateEnv(env []corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(env) > MaxEnv {
		errs = append(errs, field.TooMany(p, len(env), MaxEnv))
	}
	seen := sets.New[string]()
	for i, e := range env {
		ip := p.Index(i)
		switch {
		case e.Name == "":
			errs = append(errs, field.Required(ip.Child("name"), ""))
		case strings.HasPrefix(e.Name, ReservedEnvPrefix):
			errs = append(errs, field.Invalid(ip.Child("name"), e.Name,
				fmt.Sprintf("names starting with %s are reserved for variables handroll sets", ReservedEnvPrefix)))
		default:
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(ip.Child("name"), e.Name, msg))
			}
		}
		if seen.Has(e.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), e.Name))
		}
		seen.Insert(e.Name)
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ip.Child("valueFrom"), "", "may not be set when value is not empty"))
		}
	}
	return errs
}

func validateResources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Sorted, so that the same object always gets the same message.
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateConfig(cfg map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(cfg) > MaxConfigEntries {
		errs = append(errs, field.TooMany(p, len(cfg), MaxConfigEntries))
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		total += len(k) + len(v)
	}
	if total > MaxConfigBytes {
		errs = append(errs, field.TooLong(p, "", MaxConfigBytes))
	}
	return errs
}

// OwnedConfigMapName is the name of the ConfigMap a WebApp owns, rendered
// from spec.config.
func OwnedConfigMapName(webAppName string) string { return webAppName + "-config" }
