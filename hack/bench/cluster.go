package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

// operatorNamespace holds the operators' own objects (the directory
// ConfigMap) and the failover Leases.
const operatorNamespace = "handroll-system"

// cluster is the bench's own access to the API server: a client with limits
// far above the contenders', so that creating and cleaning up is never what
// is measured.
type cluster struct {
	kube   kubernetes.Interface
	client clientset.Interface
}

// parallel is how many requests the bench keeps in flight.
const parallel = 16

// forEach calls fn for 0..n-1 with parallel goroutines and returns the
// errors joined.
func forEach(n int, fn func(i int) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (c *cluster) createNamespaces(ctx context.Context, names []string) error {
	return forEach(len(names), func(i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return err
	})
}

// appName is the i-th WebApp's name.
func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

// newWebApp is the i-th WebApp of a run: every other one has spec.config,
// so that half of them own a ConfigMap as well as a Deployment and a
// Service.
func newWebApp(namespace string, i int) *handrollv1.WebApp {
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: appName(i), Namespace: namespace},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](1),
		},
	}
	if i%2 == 0 {
		w.Spec.Config = map[string]string{"app.yaml": fmt.Sprintf("greeting: hello from %s\n", w.Name)}
	}
	return w
}

// createWebApps creates n WebApps spread evenly over namespaces.
func (c *cluster) createWebApps(ctx context.Context, namespaces []string, n int) error {
	return forEach(n, func(i int) error {
		_, err := c.client.HandrollV1().WebApps(namespaces[i%len(namespaces)]).Create(ctx, newWebApp(namespaces[i%len(namespaces)], i), metav1.CreateOptions{})
		return err
	})
}

// wipe removes from namespaces every WebApp (dropping any finalizer a
// stopped contender left, such as the first version's directory finalizer),
// every child and every event, and removes the
// directory ConfigMap, so that the next contender's cluster-wide caches
// start from the same empty cluster. There is no garbage collector here
// (no kube-controller-manager), so children are deleted by the bench.
func (c *cluster) wipe(ctx context.Context, namespaces []string) error {
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	all := metav1.ListOptions{}
	err := forEach(len(namespaces), func(i int) error {
		ns := namespaces[i]
		webapps := c.client.HandrollV1().WebApps(ns)
		list, err := webapps.List(ctx, all)
		if err != nil {
			return err
		}
		var errs []error
		for _, w := range list.Items {
			if len(w.Finalizers) > 0 {
				_, err := webapps.Patch(ctx, w.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
		}
		errs = append(errs,
			webapps.DeleteCollection(ctx, metav1.DeleteOptions{}, all),
			c.kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
			c.kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
			c.kube.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
			c.deleteServices(ctx, ns),
		)
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("cleaning up: %w", err)
	}
	err = c.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(ctx, webapp.DirectoryName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the directory ConfigMap: %w", err)
	}
	return nil
}

// deleteServices deletes the Services of ns one by one: client-go's typed
// Service client has no DeleteCollection.
func (c *cluster) deleteServices(ctx context.Context, ns string) error {
	services := c.kube.CoreV1().Services(ns)
	list, err := services.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list.Items {
		if err := services.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setReplicas changes one WebApp's spec.replicas and returns the generation
// the change made.
func (c *cluster) setReplicas(ctx context.Context, namespace, name string, replicas int32) (int64, error) {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	w, err := c.client.HandrollV1().WebApps(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return 0, err
	}
	return w.Generation, nil
}
