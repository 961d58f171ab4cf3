package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/test/budget"
)

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
				},
			},
		},
	}
}

// TestDeploymentBecomesAvailable: the controller-manager creates a ReplicaSet
// and pods, the scheduler binds them to kwok's nodes, and kwok reports them
// Running and Ready, so the Deployment reaches readyReplicas == replicas.
func TestDeploymentBecomesAvailable(t *testing.T) {
	ns := env.Namespace(t)
	c := clientset(t)
	ctx, cancel := budget.Context(t, context.Background(), 2*time.Minute, "the Deployment to become available")
	defer cancel()

	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *appsv1.Deployment
	err := budget.Poll(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == 3 && d.Status.AvailableReplicas == 3, nil
	})
	if err != nil {
		t.Fatalf("Deployment not available: %v; last status %+v", err, last.Status)
	}

	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s; want scheduled and Running", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}

// TestDeletingAnOwnerCollectsItsDependents: deleting a Deployment removes its
// ReplicaSet and pods through the garbage collector, following the
// ownerReferences the controllers set.
func TestDeletingAnOwnerCollectsItsDependents(t *testing.T) {
	ns := env.Namespace(t)
	c := clientset(t)
	ctx, cancel := budget.Context(t, context.Background(), 2*time.Minute, "the garbage collector to take the dependents")
	defer cancel()

	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "doomed", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait for the dependents to exist, or the test would prove nothing.
	err := budget.Poll(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		rs, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(rs.Items) == 1 && len(pods.Items) == 2, nil
	})
	if err != nil {
		t.Fatalf("the Deployment's ReplicaSet and pods did not appear: %v", err)
	}

	// Background propagation: the Deployment goes at once; its dependents are
	// left to the garbage collector.
	if err := c.AppsV1().Deployments(ns).Delete(ctx, "doomed", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}); err != nil {
		t.Fatal(err)
	}
	err = budget.Poll(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		rs, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("dependents not garbage-collected after the owner was deleted: %v", err)
	}
}
