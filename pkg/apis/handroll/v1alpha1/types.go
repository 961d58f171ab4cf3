package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// Limits and defaults of v1alpha1 are v1's: an object valid in one version
// is valid in the other. The CRD markers below repeat them as literals;
// the CRD tests fail if the two ever disagree.
const (
	DefaultSize          = handrollv1.DefaultReplicas
	MinSize              = handrollv1.MinReplicas
	MaxSize              = handrollv1.MaxReplicas
	DefaultContainerPort = handrollv1.DefaultPort
	MaxEnv               = handrollv1.MaxEnv
	MaxConfigDataEntries = handrollv1.MaxConfigEntries
	MaxImageLength       = handrollv1.MaxImageLength
)

// WebApp is the v1alpha1 shape of a WebApp: a Deployment of spec.size pods
// running spec.image, a Service in front of it and, when spec.configData is
// set, a ConfigMap mounted into every pod. It is stored as handroll.dev/v1.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
//
// +kubebuilder:resource:path=webapps,singular=webapp,shortName=wa,categories=all,scope=Namespaced
// +kubebuilder:deprecatedversion:warning="handroll.dev/v1alpha1 WebApp is deprecated; use handroll.dev/v1 WebApp"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether every replica is ready and the Service exists"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.size`,description="Desired replicas"
// +kubebuilder:printcolumn:name="Ready Replicas",type=integer,JSONPath=`.status.readyReplicas`,description="Replicas that are ready"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,description="In-cluster URL of the Service"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS-1035 label of at most 63 characters (lower case letters, digits and '-', starting with a letter), because it names the Service"
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WebAppSpec `json:"spec"`

	// Status is the observed state of the WebApp; until handroll has
	// observed it, observedGeneration 0, as in v1.
	// +optional
	// +kubebuilder:default={observedGeneration: 0}
	Status WebAppStatus `json:"status,omitempty"`
}

// WebAppSpec is the desired state of a WebApp.
type WebAppSpec struct {
	// Image is the container image the pods run, for example
	// "nginx:1.27" or "registry.example/team/app@sha256:…".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image"`

	// Size is the number of pods (v1: spec.replicas). It is the scale
	// subresource's spec path.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	Size *int32 `json:"size,omitempty"`

	// ContainerPort is the port the application listens on (v1: spec.port);
	// the Service targets it. Left out, 8080; a port given (0 included) is
	// checked as given, never replaced by the default.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort *int32 `json:"containerPort,omitempty"`

	// Env is the environment of the application container. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources are the compute requests and limits of the application
	// container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="each resource request must be less than or equal to its limit",fieldPath=".requests"
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ConfigData is rendered into a ConfigMap named <name>-config, owned by
	// the WebApp and mounted at /etc/handroll/config (v1: spec.config).
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))",message="configData keys must be at most 253 characters of letters, digits, '-', '_' or '.'"
	ConfigData map[string]string `json:"configData,omitempty"`
}

// WebAppStatus is the observed state of a WebApp; its fields are v1's.
type WebAppStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// Unlike v1's it is written when 0: a v1alpha1 object exists only as the
	// conversion webhook's output, which the API server does not default
	// again, so this is how the v1 default (0 until handroll has observed
	// the WebApp) reaches a client reading v1alpha1.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// Replicas is the number of pods of the Deployment; the scale
	// subresource's status path.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the pods, in string form; the scale
	// subresource's selector path.
	// +optional
	Selector string `json:"selector,omitempty"`

	// URL is the in-cluster address of the Service.
	// +optional
	URL string `json:"url,omitempty"`

	// Conditions are Ready, Progressing and Degraded, and Reconciling or
	// Stalled while True.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// WebAppList is a list of WebApps.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []WebApp `json:"items"`
}
