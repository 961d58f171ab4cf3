package webapp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// FieldManager is the server-side apply field manager of every write.
const FieldManager = "handroll"

// Labels and annotations handroll puts on what it creates.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "handroll"

	// AnnotationConfigHash on the pod template changes whenever spec.config
	// or the data or binaryData of the spec.configMapRef ConfigMap changes,
	// so either rolls the pods.
	AnnotationConfigHash = "handroll.dev/config-hash"
	// AnnotationAppliedHash on each child is the hash of the configuration
	// last applied, so that an unchanged WebApp costs no write.
	AnnotationAppliedHash = "handroll.dev/applied-hash"
)

// Paths where the configuration is mounted in the application container.
const (
	ConfigDir     = "/etc/handroll/config"
	ConfigMapDir  = "/etc/handroll/configmap"
	containerName = "app"
)

// Selector returns the labels that select a WebApp's pods. They are part of
// the Deployment's immutable selector: never change them.
func Selector(w *handrollv1.WebApp) map[string]string {
	return map[string]string{
		LabelName:     "webapp",
		LabelInstance: w.Name,
	}
}

// The label selectors of the operator's caches: its children, cached whole
// (and trimmed), and every other object, whose metadata alone is cached.
const (
	ChildSelector   = LabelManagedBy + "=" + ManagedBy
	ForeignSelector = LabelManagedBy + "!=" + ManagedBy
)

// Labels returns the labels of every child: the selector plus managed-by,
// which the operator's cache filters on.
func Labels(w *handrollv1.WebApp) map[string]string {
	l := Selector(w)
	l[LabelManagedBy] = ManagedBy
	return l
}

// ownerReference makes the WebApp the controller of a child, so that the
// garbage collector deletes the child with it and the Owns handler maps the
// child's events back to it.
func ownerReference(w *handrollv1.WebApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(handrollv1.SchemeGroupVersion.String()).
		WithKind(handrollv1.WebAppKind).
		WithName(w.Name).
		WithUID(w.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ConfigHash hashes spec.config and the data and binaryData of the
// referenced ConfigMap (nil when there is none), in a stable order. Each
// part is length-prefixed and ends with a zero byte, so a key in data and
// the same key in binaryData hash differently. binaryData is hashed only
// when it has keys, so that the hash of a WebApp whose ConfigMap has none
// is the one earlier versions computed and an upgrade rolls no pods.
func ConfigHash(config map[string]string, ref *corev1.ConfigMap) string {
	h := sha256.New()
	var refData map[string]string
	if ref != nil {
		refData = ref.Data
	}
	for _, part := range []map[string]string{config, refData} {
		for _, k := range slices.Sorted(maps.Keys(part)) {
			fmt.Fprintf(h, "%d:%s=%d:%s;", len(k), k, len(part[k]), part[k])
		}
		h.Write([]byte{0})
	}
	if ref != nil && len(ref.BinaryData) > 0 {
		for _, k := range slices.Sorted(maps.Keys(ref.BinaryData)) {
			fmt.Fprintf(h, "%d:%s=%d:", len(k), k, len(ref.BinaryData[k]))
			h.Write(ref.BinaryData[k])
			h.Write([]byte{';'})
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DesiredConfigMap returns the ConfigMap rendered from spec.config, or nil
// when spec.config is empty.
//
// Every field a Desired* function sets must be kept by the children's
// caches, or it reads as drift on every reconcile: the contract is stated
// at pkg/cache CompactChild.
func DesiredConfigMap(w *handrollv1.WebApp) *corev1ac.ConfigMapApplyConfiguration {
	if len(w.Spec.Config) == 0 {
		return nil
	}
	cm := corev1ac.ConfigMap(handrollv1.OwnedConfigMapName(w.Name), w.Namespace).
		WithLabels(Labels(w)).
		WithOwnerReferences(ownerReference(w)).
		WithData(maps.Clone(w.Spec.Config))
	return withAppliedHash(cm)
}

// DesiredService returns the Service in front of the pods.
func DesiredService(w *handrollv1.WebApp) *corev1ac.ServiceApplyConfiguration {
	svc := effectiveService(w)
	port := corev1ac.ServicePort().
		WithName("http").
		WithProtocol(corev1.ProtocolTCP).
		WithPort(*svc.Port).
		WithTargetPort(intstr.FromString("http"))
	if *svc.Type == handrollv1.ServiceTypeNodePort && svc.NodePort != 0 {
		port.WithNodePort(svc.NodePort)
	}
	s := corev1ac.Service(w.Name, w.Namespace).
		WithLabels(Labels(w)).
		WithOwnerReferences(ownerReference(w)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceType(*svc.Type)).
			WithSelector(Selector(w)).
			WithPorts(port))
	return withAppliedHash(s)
}

// DesiredDeployment returns the Deployment running the pods. ref is the
// spec.configMapRef ConfigMap (nil when there is none or it is missing); the
// hash of its contents goes into the pod template.
func DesiredDeployment(w *handrollv1.WebApp, ref *corev1.ConfigMap) *appsv1ac.DeploymentApplyConfiguration {
	replicas := handrollv1.DefaultReplicas
	if w.Spec.Replicas != nil {
		replicas = *w.Spec.Replicas
	}
	port := ptr.Deref(w.Spec.Port, handrollv1.DefaultPort)

	container := corev1ac.Container().
		WithName(containerName).
		WithImage(w.Spec.Image).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)).
		WithEnv(env(w)...)
	if r := w.Spec.Resources; len(r.Requests) > 0 || len(r.Limits) > 0 {
		rr := corev1ac.ResourceRequirements()
		if len(r.Requests) > 0 {
			rr.WithRequests(r.Requests.DeepCopy())
		}
		if len(r.Limits) > 0 {
			rr.WithLimits(r.Limits.DeepCopy())
		}
		container.WithResources(rr)
	}

	pod := corev1ac.PodSpec()
	if len(w.Spec.Config) > 0 {
		pod.WithVolumes(corev1ac.Volume().WithName("config").
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(handrollv1.OwnedConfigMapName(w.Name))))
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("config").WithMountPath(ConfigDir).WithReadOnly(true))
	}
	if r := w.Spec.ConfigMapRef; r != nil {
		pod.WithVolumes(corev1ac.Volume().WithName("configmap").
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(r.Name)))
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("configmap").WithMountPath(ConfigMapDir).WithReadOnly(true))
	}
	pod.WithContainers(container)

	d := appsv1ac.Deployment(w.Name, w.Namespace).
		WithLabels(Labels(w)).
		WithOwnerReferences(ownerReference(w)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(Selector(w))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(Labels(w)).
				WithAnnotations(map[string]string{AnnotationConfigHash: ConfigHash(w.Spec.Config, ref)}).
				WithSpec(pod)))
	return withAppliedHash(d)
}

// env is the user's environment plus the variables handroll sets, which use
// the reserved HANDROLL_ prefix.
func env(w *handrollv1.WebApp) []*corev1ac.EnvVarApplyConfiguration {
	var out []*corev1ac.EnvVarApplyConfiguration
	for _, e := range w.Spec.Env {
		ev := corev1ac.EnvVar().WithName(e.Name)
		if e.ValueFrom != nil {
			ev.WithValueFrom(envVarSource(e.ValueFrom))
		} else {
			ev.WithValue(e.Value)
		}
		out = append(out, ev)
	}
	port := ptr.Deref(w.Spec.Port, handrollv1.DefaultPort)
	out = append(out,
		corev1ac.EnvVar().WithName(handrollv1.ReservedEnvPrefix+"WEBAPP").WithValue(w.Name),
		corev1ac.EnvVar().WithName(handrollv1.ReservedEnvPrefix+"PORT").WithValue(fmt.Sprint(port)),
	)
	return out
}

// envVarSource converts a typed EnvVarSource into its apply configuration
// through JSON, which the two share field for field.
func envVarSource(src *corev1.EnvVarSource) *corev1ac.EnvVarSourceApplyConfiguration {
	data, err := json.Marshal(src)
	if err != nil {
		panic(fmt.Sprintf("marshalling an EnvVarSource cannot fail: %v", err))
	}
	var out corev1ac.EnvVarSourceApplyConfiguration
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("an EnvVarSource always fits its apply configuration: %v", err))
	}
	return &out
}

// effectiveService returns spec.service with defaults filled in, without
// changing the WebApp (which may be a shared cached object).
func effectiveService(w *handrollv1.WebApp) handrollv1.WebAppService {
	svc := handrollv1.WebAppService{}
	if w.Spec.Service != nil {
		svc = *w.Spec.Service
	}
	handrollv1.SetDefaults_WebAppService(&svc)
	return svc
}

// URL is the in-cluster address of a WebApp's Service.
func URL(w *handrollv1.WebApp) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", w.Name, w.Namespace, *effectiveService(w).Port)
}

// annotated is an apply configuration whose annotations can be set.
type annotated[T any] interface {
	WithAnnotations(map[string]string) T
}

// withAppliedHash stamps obj with the hash of its own configuration (before
// the stamp), so that the next reconcile can tell, from the cached child
// alone, whether this exact configuration is already applied.
func withAppliedHash[T any](obj annotated[T]) T {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("marshalling an apply configuration cannot fail: %v", err))
	}
	sum := sha256.Sum256(data)
	return obj.WithAnnotations(map[string]string{AnnotationAppliedHash: hex.EncodeToString(sum[:8])})
}
