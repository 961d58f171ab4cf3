package stripjson

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// webApp is a WebApp as the API server sends it once kubectl apply made
// it and handroll wrote its status: managedFields of three managers, the
// last-applied annotation, a status with conditions.
func webApp(name string) *handrollv1.WebApp {
	now := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	spec := handrollv1.WebAppSpec{
		Image: "registry.example.com/team/web:1.2.3", Replicas: ptr.To[int32](3), Port: ptr.To[int32](8080),
		Env:       []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu-west-1"}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		Config:    map[string]string{"greeting": "hello", "managedFields": "not metadata's"},
	}
	applied, _ := json.Marshal(map[string]any{"apiVersion": "handroll.dev/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "labels": map[string]string{"app": name}}, "spec": spec})
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "handroll.dev/v1", Time: &now,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
	}
	return &handrollv1.WebApp{
		TypeMeta: metav1.TypeMeta{APIVersion: "handroll.dev/v1", Kind: "WebApp"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-a", UID: "0a1b2c3d-0000-4000-8000-00000000beef", ResourceVersion: "123456",
			Generation: 2, CreationTimestamp: now, Labels: map[string]string{"app": name},
			Annotations: map[string]string{LastApplied: string(applied) + "\n"},
			Finalizers:  []string{"handroll.dev/cleanup"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, "",
					`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:config":{".":{},"f:greeting":{},"f:managedFields":{}},"f:env":{},"f:image":{},"f:port":{},"f:replicas":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}}`),
				entry("handroll", metav1.ManagedFieldsOperationUpdate, "",
					`{"f:metadata":{"f:finalizers":{".":{},"v:\"handroll.dev/cleanup\"":{}}}}`),
				entry("handroll", metav1.ManagedFieldsOperationApply, "status",
					`{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:selector":{},"f:url":{}}}`),
			},
		},
		Spec: spec,
		Status: handrollv1.WebAppStatus{
			ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, Selector: "app=" + name, URL: "http://" + name + ".team-a.svc:8080",
			Conditions: []metav1.Condition{
				{Type: "Available", Status: metav1.ConditionTrue, ObservedGeneration: 2, LastTransitionTime: now, Reason: "MinimumReplicasAvailable", Message: "3 of 3 replicas ready"},
				{Type: "Progressing", Status: metav1.ConditionTrue, ObservedGeneration: 2, LastTransitionTime: now, Reason: "NewReplicaSetAvailable", Message: "the Deployment has rolled out"},
			},
		},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
