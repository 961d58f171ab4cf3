package cache

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// The listers below route each namespaced read to the factory that caches
// that namespace. A namespace outside --namespaces holds nothing: its reads
// answer NotFound and empty lists, as a cache restricted by
// DefaultNamespaces does.

type webAppLister struct{ c *Caches }

func (l webAppLister) List(sel labels.Selector) ([]*handrollv1.WebApp, error) {
	var out []*handrollv1.WebApp
	for _, ns := range l.c.namespaces {
		items, err := l.c.handroll[ns].Handroll().V1().WebApps().Lister().List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (l webAppLister) WebApps(namespace string) handrolllisters.WebAppNamespaceLister {
	if key, ok := l.c.factoryNamespace(namespace); ok {
		return l.c.handroll[key].Handroll().V1().WebApps().Lister().WebApps(namespace)
	}
	return emptyNamespace[*handrollv1.WebApp]{handrollv1.Resource(handrollv1.WebAppResource)}
}

type deploymentLister struct{ c *Caches }

func (l deploymentLister) List(sel labels.Selector) ([]*appsv1.Deployment, error) {
	var out []*appsv1.Deployment
	for _, ns := range l.c.namespaces {
		items, err := l.Deployments(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (l deploymentLister) Deployments(namespace string) appslisters.DeploymentNamespaceLister {
	if key, ok := l.c.factoryNamespace(namespace); ok {
		return deploymentsIn{l.c.children[key].Apps().V1().Deployments().Informer().GetIndexer()}.Deployments(namespace)
	}
	return emptyNamespace[*appsv1.Deployment]{appsv1.Resource("deployments")}
}

type serviceLister struct{ c *Caches }

func (l serviceLister) List(sel labels.Selector) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, ns := range l.c.namespaces {
		items, err := l.Services(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (l serviceLister) Services(namespace string) corelisters.ServiceNamespaceLister {
	if key, ok := l.c.factoryNamespace(namespace); ok {
		return servicesIn{l.c.children[key].Core().V1().Services().Informer().GetIndexer()}.Services(namespace)
	}
	return emptyNamespace[*corev1.Service]{corev1.Resource("services")}
}

type serviceMeta struct{ c *Caches }

func (l serviceMeta) Get(namespace, name string) (metav1.Object, error) {
	key, ok := l.c.factoryNamespace(namespace)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
	}
	return NewServiceMeta(l.c.children[key].Core().V1().Services().Informer().GetIndexer()).Get(namespace, name)
}

type configMapLister struct{ c *Caches }

func (l configMapLister) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	var out []*corev1.ConfigMap
	for _, ns := range l.c.configMapNamespaces() {
		items, err := l.ConfigMaps(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (l configMapLister) ConfigMaps(namespace string) corelisters.ConfigMapNamespaceLister {
	if namespace != "" && namespace == l.c.extraNS {
		return configMapsIn{l.c.extra.Core().V1().ConfigMaps().Informer().GetIndexer()}.ConfigMaps(namespace)
	}
	if key, ok := l.c.factoryNamespace(namespace); ok {
		return configMapsIn{l.c.children[key].Core().V1().ConfigMaps().Informer().GetIndexer()}.ConfigMaps(namespace)
	}
	return emptyNamespace[*corev1.ConfigMap]{corev1.Resource("configmaps")}
}

// MetadataLister reads the metadata caches of one resource.
type MetadataLister interface {
	// Get returns what the cache holds of namespace/name (see Ref), or
	// NotFound.
	Get(namespace, name string) (*metav1.PartialObjectMetadata, error)
}

type metadataLister struct {
	c        *Caches
	resource schema.GroupVersionResource
}

func (l metadataLister) Get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	key, ok := l.c.factoryNamespace(namespace)
	if !ok {
		return nil, apierrors.NewNotFound(l.resource.GroupResource(), name)
	}
	// The indexer itself: the factory's lister expects the metadata
	// client's own type, not the Ref that TrimMetadata stores.
	obj, exists, err := l.c.metadataFactory(key, l.resource).ForResource(l.resource).Informer().GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(l.resource.GroupResource(), name)
	}
	r, ok := obj.(*Ref)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: the metadata cache holds a %T", l.resource.Resource, namespace, name, obj)
	}
	return r.PartialObjectMetadata(), nil
}

// emptyNamespace is the lister of a namespace that is not cached.
type emptyNamespace[T any] struct{ resource schema.GroupResource }

func (e emptyNamespace[T]) List(labels.Selector) ([]T, error) { return nil, nil }

func (e emptyNamespace[T]) Get(name string) (T, error) {
	var zero T
	return zero, apierrors.NewNotFound(e.resource, name)
}
