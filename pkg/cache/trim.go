package cache

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimChild is the first step of the transform of the caches of handroll's
// children (the Deployments, Services and ConfigMaps labelled as ours;
// CompactChild): it makes a new, small object holding only what their
// readers use, and drops server defaults, other managers' fields and most
// of the status. Other types get StripForCache.
//
// What is kept, and who reads it:
//
//   - metadata: the key, uid and resourceVersion (the listers, justWritten,
//     the delete precondition), generation (the Deployment's rollout),
//     labels and annotations (the applied hash, the directory's number of
//     parts), ownerReferences (whose child it is), deletionTimestamp and
//     finalizers;
//   - of each spec, every field that pkg/controller/webapp's Desired*
//     functions set: the reconciler compares those with FirstDifference,
//     so a field set there and dropped here would read as drift on every
//     reconcile, an apply loop (TestEveryDesiredFieldSurvivesTrimAndPack);
//   - of a Deployment's status, what ComputeStatus reads;
//   - a ConfigMap's data and binaryData (the directory; a configMapRef when
//     no metadata cache serves it).
//
// A field added to what handroll applies must be added here too.
func TrimChild(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return trimDeployment(o), nil
	case *corev1.Service:
		return trimService(o), nil
	case *corev1.ConfigMap:
		return trimConfigMap(o), nil
	}
	return StripForCache(obj) // a tombstone, or a kind not trimmed
}

// trimMeta keeps what is read of an object's metadata. The maps and slices
// are shared, not copied: the decoded object is the transform's to keep.
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	annotations := m.Annotations
	delete(annotations, lastApplied)
	internLabels(m.Labels)
	internKeys(annotations)
	internOwners(m.OwnerReferences)
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         intern(m.Namespace),
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		Annotations:       annotations,
		OwnerReferences:   m.OwnerReferences,
		Finalizers:        m.Finalizers,
	}
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func trimDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	tmpl := &d.Spec.Template
	meta := trimMeta(&d.ObjectMeta)
	// The pod template's labels are the Deployment's own (webapp.Labels):
	// one map for both, as nothing writes to a cached object.
	tmplLabels := tmpl.Labels
	if maps.Equal(tmplLabels, meta.Labels) {
		tmplLabels = meta.Labels
	} else {
		internLabels(tmplLabels)
	}
	internKeys(tmpl.Annotations)
	if d.Spec.Selector != nil {
		internLabels(d.Spec.Selector.MatchLabels)
	}
	out := &appsv1.Deployment{
		TypeMeta:   d.TypeMeta,
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: d.Spec.Replicas,
			Selector: d.Spec.Selector,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmplLabels, Annotations: tmpl.Annotations},
				Spec: corev1.PodSpec{
					Containers: trimContainers(tmpl.Spec.Containers),
					Volumes:    trimVolumes(tmpl.Spec.Volumes),
				},
			},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: d.Status.ObservedGeneration,
			Replicas:           d.Status.Replicas,
			UpdatedReplicas:    d.Status.UpdatedReplicas,
			ReadyReplicas:      d.Status.ReadyReplicas,
			AvailableReplicas:  d.Status.AvailableReplicas,
		},
	}
	if len(d.Status.Conditions) > 0 {
		// ComputeStatus reads type, status, reason and message; the
		// timestamps are two allocations each.
		out.Status.Conditions = make([]appsv1.DeploymentCondition, len(d.Status.Conditions))
		for i, c := range d.Status.Conditions {
			out.Status.Conditions[i] = appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return out
}

// trimContainers keeps, of each container, the fields DesiredDeployment
// sets: name, image, ports, env, resources' requests and limits, volume
// mounts. Ports, env and mounts are kept whole: they are small, and only
// protocol is a server default among them.
func trimContainers(in []corev1.Container) []corev1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		c := &in[i]
		out[i] = corev1.Container{
			Name:         c.Name,
			Image:        c.Image,
			Ports:        c.Ports,
			Env:          c.Env,
			Resources:    corev1.ResourceRequirements{Limits: c.Resources.Limits, Requests: c.Resources.Requests},
			VolumeMounts: c.VolumeMounts,
		}
	}
	return out
}

// trimVolumes keeps each volume's name and ConfigMap source, the only source
// handroll mounts; a volume of another source keeps its name alone, which is
// enough for FirstDifference to see that it is not the ConfigMap desired.
func trimVolumes(in []corev1.Volume) []corev1.Volume {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Volume, len(in))
	for i := range in {
		out[i] = corev1.Volume{Name: in[i].Name, VolumeSource: corev1.VolumeSource{ConfigMap: in[i].ConfigMap}}
	}
	return out
}

// trimService keeps what DesiredService sets (type, selector, ports) and
// drops the rest of the spec (cluster IPs, IP families, policies: server
// defaults) and the status. The directory reads only the owner.
func trimService(s *corev1.Service) *corev1.Service {
	internLabels(s.Spec.Selector)
	return &corev1.Service{
		TypeMeta:   s.TypeMeta,
		ObjectMeta: trimMeta(&s.ObjectMeta),
		Spec: corev1.ServiceSpec{
			Type:     s.Spec.Type,
			Selector: s.Spec.Selector,
			Ports:    s.Spec.Ports,
		},
	}
}

func trimConfigMap(cm *corev1.ConfigMap) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   cm.TypeMeta,
		ObjectMeta: trimMeta(&cm.ObjectMeta),
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
	}
}
