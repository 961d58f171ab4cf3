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
	"k8s.io/client-go/tools/cache"
)

// Child is what the children's caches keep of a child a WebApp controls:
// the metadata the informer's keys, the indexers and the controllers'
// handlers read, as fields, and the rest of the trimmed object (labels and
// annotations, spec, status, data) as protobuf, decoded on each read.
//
// A decoded Deployment is 4 to 5 KiB of Go structs and maps for some 500
// bytes on the wire, and it is read once per reconcile: keeping the bytes
// costs a decode of a few microseconds per read and saves most of the
// memory handroll's caches grow with per WebApp.
type Child struct {
	metav1.ObjectMeta // no labels or annotations: see GetLabels
	kind              childKind
	body              []byte
}

// GetObjectMeta is c itself, so that no reader reaches the embedded
// metadata without its labels and annotations.
func (c *Child) GetObjectMeta() metav1.Object { return c }

// GetLabels decodes c's labels: nothing reads a cached child's labels on a
// hot path (its selector is the server's, on the list and watch).
func (c *Child) GetLabels() map[string]string {
	m, err := c.meta()
	if err != nil {
		return nil
	}
	return m.Labels
}

// GetAnnotations decodes c's annotations, as GetLabels.
func (c *Child) GetAnnotations() map[string]string {
	m, err := c.meta()
	if err != nil {
		return nil
	}
	return m.Annotations
}

func (c *Child) meta() (*metav1.ObjectMeta, error) {
	obj, err := c.Object()
	if err != nil {
		return nil, err
	}
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta), nil
}

type childKind uint8

const (
	childDeployment childKind = iota + 1
	childService
	childConfigMap
)

// CompactChild is the transform of the children's caches: TrimChild, then,
// for a child that a controller owns, its Child. What else they hold (the
// operator's own ConfigMaps, read whole on every rebuild of the directory)
// stays a trimmed object.
//
// It is the home of the contract between three places: every field that
// pkg/controller/webapp's Desired* functions set, TrimChild keeps, and
// pack keeps whatever TrimChild keeps (Child.Object decodes to exactly
// TrimChild's object). So a child that holds what handroll applied reads
// up to date through the children's listers (FirstDifference is ""), and
// nothing is applied again: TestEveryDesiredFieldSurvivesTrimAndPack. A
// field added to a Desired* function must be added to TrimChild; pack
// encodes whole specs, and needs a change only for a new kind.
func CompactChild(obj any) (any, error) {
	trimmed, err := TrimChild(obj)
	if err != nil {
		return nil, err
	}
	m, ok := trimmed.(metav1.Object)
	if !ok || metav1.GetControllerOfNoCopy(m) == nil {
		return trimmed, nil
	}
	return pack(trimmed)
}

// pack keeps a trimmed object's metadata but its labels and annotations
// as fields, and encodes the rest: it drops nothing TrimChild kept
// (TestCompactChildDecodesToTrimChild), see CompactChild.
func pack(obj any) (any, error) {
	var (
		c    = &Child{}
		meta *metav1.ObjectMeta
		err  error
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, c.kind = &o.ObjectMeta, childDeployment
		c.body, err = (&appsv1.Deployment{ObjectMeta: encoded(meta), Spec: o.Spec, Status: o.Status}).Marshal()
	case *corev1.Service:
		meta, c.kind = &o.ObjectMeta, childService
		c.body, err = (&corev1.Service{ObjectMeta: encoded(meta), Spec: o.Spec}).Marshal()
	case *corev1.ConfigMap:
		meta, c.kind = &o.ObjectMeta, childConfigMap
		c.body, err = (&corev1.ConfigMap{ObjectMeta: encoded(meta), Data: o.Data, BinaryData: o.BinaryData}).Marshal()
	default:
		return obj, nil
	}
	if err != nil {
		return nil, fmt.Errorf("packing %s/%s: %w", meta.Namespace, meta.Name, err)
	}
	c.ObjectMeta = *meta
	c.Labels, c.Annotations = nil, nil
	return c, nil
}

// encoded is the part of m that a Child keeps in its body.
func encoded(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: m.Labels, Annotations: m.Annotations}
}

// Object decodes c into a new object of its type. Its metadata's slices
// (owners, finalizers) are c's: like any object a lister returns, it is
// read-only.
func (c *Child) Object() (any, error) {
	var (
		out  any
		meta *metav1.ObjectMeta
		err  error
	)
	switch c.kind {
	case childDeployment:
		d := &appsv1.Deployment{}
		err, meta, out = d.Unmarshal(c.body), &d.ObjectMeta, d
	case childService:
		s := &corev1.Service{}
		err, meta, out = s.Unmarshal(c.body), &s.ObjectMeta, s
	case childConfigMap:
		cm := &corev1.ConfigMap{}
		err, meta, out = cm.Unmarshal(c.body), &cm.ObjectMeta, cm
	default:
		return nil, fmt.Errorf("%s/%s: a cached child of unknown kind %d", c.Namespace, c.Name, c.kind)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding the cached %s/%s: %w", c.Namespace, c.Name, err)
	}
	labels, annotations := meta.Labels, meta.Annotations
	*meta = c.ObjectMeta
	meta.Labels, meta.Annotations = labels, annotations
	return out, nil
}

// unpack returns what a children's cache holds as a T: a Child decoded,
// or a trimmed object as it is.
func unpack[T any](obj any) (T, error) {
	if c, ok := obj.(*Child); ok {
		decoded, err := c.Object()
		if err != nil {
			var zero T
			return zero, err
		}
		obj = decoded
	}
	t, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("a children's cache holds a %T where a %T belongs", obj, zero)
	}
	return t, nil
}

// childLister reads one children's cache, in one namespace or (namespace
// "") all it holds, and decodes what it hands out.
type childLister[T any] struct {
	indexer   cache.Indexer
	namespace string
	resource  schema.GroupResource
}

func (l childLister[T]) Get(name string) (T, error) {
	obj, exists, err := l.indexer.GetByKey(l.namespace + "/" + name)
	if err == nil && !exists {
		err = apierrors.NewNotFound(l.resource, name)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return unpack[T](obj)
}

// List decodes every object of the namespace: the labels sel reads are in
// the encoded part.
func (l childLister[T]) List(sel labels.Selector) ([]T, error) {
	var (
		objs []any
		err  error
	)
	if l.namespace == metav1.NamespaceAll {
		objs = l.indexer.List()
	} else if objs, err = l.indexer.ByIndex(cache.NamespaceIndex, l.namespace); err != nil {
		return nil, err
	}
	var out []T
	for _, obj := range objs {
		t, err := unpack[T](obj)
		if err != nil {
			return nil, err
		}
		if m, ok := any(t).(metav1.Object); ok && sel.Matches(labels.Set(m.GetLabels())) {
			out = append(out, t)
		}
	}
	return out, nil
}

// NewDeploymentLister, NewServiceLister and NewConfigMapLister read one
// indexer of a children's cache (CompactChild's objects), as the listers of
// Caches do: for a reconciler over indexers of its own.
func NewDeploymentLister(indexer cache.Indexer) appslisters.DeploymentLister {
	return deploymentsIn{indexer}
}

// NewServiceLister: see NewDeploymentLister.
func NewServiceLister(indexer cache.Indexer) corelisters.ServiceLister { return servicesIn{indexer} }

// NewConfigMapLister: see NewDeploymentLister.
func NewConfigMapLister(indexer cache.Indexer) corelisters.ConfigMapLister {
	return configMapsIn{indexer}
}

// ObjectMetaGetter reads what a children's cache holds of an object's
// metadata, decoding nothing: a Child's fields, whose labels and
// annotations decode only when read. What it returns is read-only.
type ObjectMetaGetter interface {
	Get(namespace, name string) (metav1.Object, error)
}

// NewServiceMeta reads one indexer of a children's cache, as
// Caches.ServiceMeta does.
func NewServiceMeta(indexer cache.Indexer) ObjectMetaGetter {
	return metaIn{indexer, corev1.Resource("services")}
}

type metaIn struct {
	indexer  cache.Indexer
	resource schema.GroupResource
}

func (l metaIn) Get(namespace, name string) (metav1.Object, error) {
	obj, exists, err := l.indexer.GetByKey(namespace + "/" + name)
	if err == nil && !exists {
		err = apierrors.NewNotFound(l.resource, name)
	}
	if err != nil {
		return nil, err
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: the cache holds a %T", l.resource, namespace, name, obj)
	}
	return m, nil
}

type deploymentsIn struct{ indexer cache.Indexer }

func (l deploymentsIn) List(sel labels.Selector) ([]*appsv1.Deployment, error) {
	return l.Deployments(metav1.NamespaceAll).List(sel)
}

func (l deploymentsIn) Deployments(namespace string) appslisters.DeploymentNamespaceLister {
	return childLister[*appsv1.Deployment]{l.indexer, namespace, appsv1.Resource("deployments")}
}

type servicesIn struct{ indexer cache.Indexer }

func (l servicesIn) List(sel labels.Selector) ([]*corev1.Service, error) {
	return l.Services(metav1.NamespaceAll).List(sel)
}

func (l servicesIn) Services(namespace string) corelisters.ServiceNamespaceLister {
	return childLister[*corev1.Service]{l.indexer, namespace, corev1.Resource("services")}
}

type configMapsIn struct{ indexer cache.Indexer }

func (l configMapsIn) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	return l.ConfigMaps(metav1.NamespaceAll).List(sel)
}

func (l configMapsIn) ConfigMaps(namespace string) corelisters.ConfigMapNamespaceLister {
	return childLister[*corev1.ConfigMap]{l.indexer, namespace, corev1.Resource("configmaps")}
}
