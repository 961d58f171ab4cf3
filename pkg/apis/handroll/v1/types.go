package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits and defaults of the WebApp API. The CRD markers below repeat these
// numbers as literals (markers cannot name a constant); crd_test.go fails if
// the generated schema and these constants ever disagree.
const (
	DefaultReplicas    int32 = 1
	MinReplicas        int32 = 0
	MaxReplicas        int32 = 50
	DefaultPort        int32 = 8080
	DefaultServicePort int32 = 80
	MaxEnv                   = 128
	MaxConfigEntries         = 256
	MaxImageLength           = 4096

	// MinNodePort and MaxNodePort are the default service-node-port-range of
	// kube-apiserver.
	MinNodePort int32 = 30000
	MaxNodePort int32 = 32767

	// MaxNameLength keeps the WebApp name usable as a Service name and as a
	// label value (both at most 63 characters).
	MaxNameLength = 63
)

// Condition types reported in WebAppStatus.Conditions.
const (
	// ConditionReady is True when the Deployment has every desired replica
	// ready and the Service exists.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a rollout is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the reconciler cannot make the children
	// match the spec (for example a name conflict with an object we do not own).
	ConditionDegraded = "Degraded"

	// ConditionReconciling and ConditionStalled are the "abnormal-true"
	// conditions that kstatus (sigs.k8s.io/cli-utils, read by Flux, kpt and
	// Config Sync) looks for first. They are present only while True.
	//
	// ConditionReconciling is True while the spec is not yet applied or a
	// rollout is under way: kstatus reads the WebApp as InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the WebApp cannot progress without a
	// person: a child name held by a foreign object, a child the API server
	// refuses, a rollout past its progress deadline. kstatus reads it as
	// Failed.
	ConditionStalled = "Stalled"
)

// WebApp runs a stateless web application: a Deployment of spec.replicas pods
// running spec.image, a Service in front of it and, when spec.config is set, a
// ConfigMap mounted into every pod.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
//
// +kubebuilder:resource:path=webapps,singular=webapp,shortName=wa,categories=all,scope=Namespaced
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether every replica is ready and the Service exists"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,description="Desired replicas"
// +kubebuilder:printcolumn:name="Ready Replicas",type=integer,JSONPath=`.status.readyReplicas`,description="Replicas that are ready"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,description="In-cluster URL of the Service"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS-1035 label of at most 63 characters (lower case letters, digits and '-', starting with a letter), because it names the Service"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.configMapRef) || self.spec.configMapRef.name != self.metadata.name + '-config'",message="must not be <name>-config: that ConfigMap is owned by handroll and rendered from spec.config",fieldPath=".spec.configMapRef.name"
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WebAppSpec `json:"spec"`

	// Status is the observed state of the WebApp, written by handroll. Until
	// handroll has observed the WebApp it reads observedGeneration 0: the API
	// server drops the status of a new object and fills in this default, so
	// that a tool comparing it with metadata.generation (kstatus, Flux) sees
	// the WebApp in progress rather than done.
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

	// Replicas is the number of pods. It is the scale subresource's
	// spec path, so `kubectl scale` and a HorizontalPodAutoscaler can set it.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	Replicas *int32 `json:"replicas,omitempty"`

	// Port is the container port the application listens on; the Service
	// targets it. Left out, 8080; a port given (0 included) is checked as
	// given, never replaced by the default.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

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

	// Config is rendered into a ConfigMap named <name>-config, owned by the
	// WebApp and mounted at /etc/handroll/config. Its content hash is part of
	// the pod template, so a change rolls the pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))",message="config keys must be at most 253 characters of letters, digits, '-', '_' or '.'"
	Config map[string]string `json:"config,omitempty"`

	// ConfigMapRef names a ConfigMap in the WebApp's namespace, owned by the
	// user, mounted at /etc/handroll/configmap. A change to it rolls the pods.
	// +optional
	ConfigMapRef *ConfigMapReference `json:"configMapRef,omitempty"`

	// Service shapes the Service in front of the pods.
	// +optional
	// +kubebuilder:default={}
	Service *WebAppService `json:"service,omitempty"`
}

// ConfigMapReference names a ConfigMap in the same namespace.
type ConfigMapReference struct {
	// Name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ServiceType is the type of the Service in front of a WebApp.
// +kubebuilder:validation:Enum=ClusterIP;NodePort
type ServiceType string

// The Service types a WebApp may ask for.
const (
	ServiceTypeClusterIP ServiceType = "ClusterIP"
	ServiceTypeNodePort  ServiceType = "NodePort"
)

// WebAppService shapes the Service in front of the pods.
// +kubebuilder:validation:XValidation:rule="self.type == 'NodePort' || !has(self.nodePort)",message="nodePort may only be set when type is NodePort",fieldPath=".nodePort"
type WebAppService struct {
	// Type is ClusterIP or NodePort; left out, ClusterIP. An empty type
	// given is refused.
	// +optional
	// +kubebuilder:default=ClusterIP
	Type *ServiceType `json:"type,omitempty"`

	// Port is the port the Service listens on; left out, 80.
	// A port given (0 included) is checked as given.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// NodePort is the port on every node when Type is NodePort; empty lets
	// the cluster choose one.
	// +optional
	// +kubebuilder:validation:Minimum=30000
	// +kubebuilder:validation:Maximum=32767
	NodePort int32 `json:"nodePort,omitempty"`
}

// WebAppStatus is the observed state of a WebApp.
type WebAppStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods of the Deployment; the scale
	// subresource's status path.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the pods, in string form; the scale
	// subresource's selector path, which a HorizontalPodAutoscaler needs.
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
