package webapp

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// MetadataGetter reads a metadata-only cache (pkg/cache.MetadataLister).
type MetadataGetter interface {
	Get(namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// RefConfigMaps holds the ConfigMaps that WebApps name in spec.configMapRef,
// whole, and only those, for as long as one does (WatchReferences): the cache of every ConfigMap keeps metadata alone,
// so a user's ConfigMap is read from the API server when its
// resourceVersion in that cache is not the one held here. A rollout on its
// change costs one GET, and memory follows what WebApps reference rather
// than what the cluster stores.
type RefConfigMaps struct {
	Kube kubernetes.Interface

	mu   sync.Mutex
	held map[types.NamespacedName]*corev1.ConfigMap
}

// Get returns namespace/name as of resourceVersion rv or later.
func (c *RefConfigMaps) Get(ctx context.Context, namespace, name, rv string) (*corev1.ConfigMap, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	cm, ok := c.held[key]
	c.mu.Unlock()
	if ok && cm.ResourceVersion == rv {
		return cm, nil
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.Forget(namespace, name)
	}
	if err != nil {
		return nil, err
	}
	// Only what the config hash reads is kept.
	kept := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: cm.UID, ResourceVersion: cm.ResourceVersion},
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
	}
	c.mu.Lock()
	if c.held == nil {
		c.held = map[types.NamespacedName]*corev1.ConfigMap{}
	}
	c.held[key] = kept
	c.mu.Unlock()
	return kept, nil
}

// Held is how many ConfigMaps are held.
func (c *RefConfigMaps) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// WatchReferences forgets a held ConfigMap once no WebApp in webapps names
// it any more: when the last one that did names another, or none, or is
// deleted. webapps carry AddIndexers' index, which the informer updates
// before it tells its handlers, so the index already says who else still
// names it.
func (c *RefConfigMaps) WatchReferences(webapps []cache.SharedIndexInformer) error {
	forget := func(w *handrollv1.WebApp) {
		if w == nil || w.Spec.ConfigMapRef == nil {
			return
		}
		key := w.Namespace + "/" + w.Spec.ConfigMapRef.Name
		for _, informer := range webapps {
			if objs, err := informer.GetIndexer().ByIndex(IndexConfigMapRef, key); err != nil || len(objs) > 0 {
				return // still named, or the index cannot say: keep it
			}
		}
		c.Forget(w.Namespace, w.Spec.ConfigMapRef.Name)
	}
	handler := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*handrollv1.WebApp)
			n, _ := newObj.(*handrollv1.WebApp)
			if o != nil && n != nil && !equality.Semantic.DeepEqual(o.Spec.ConfigMapRef, n.Spec.ConfigMapRef) {
				forget(o)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			w, _ := obj.(*handrollv1.WebApp)
			forget(w)
		},
	}
	for _, informer := range webapps {
		if _, err := informer.AddEventHandler(handler); err != nil {
			return err
		}
	}
	return nil
}

// Forget drops namespace/name, once it is deleted.
func (c *RefConfigMaps) Forget(namespace, name string) {
	c.mu.Lock()
	delete(c.held, types.NamespacedName{Namespace: namespace, Name: name})
	c.mu.Unlock()
}

// referenced returns the ConfigMap a spec.configMapRef names, or NotFound.
func (r *Reconciler) referenced(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	if r.ConfigMapMeta == nil || r.RefConfigMaps == nil {
		return r.ConfigMaps.ConfigMaps(namespace).Get(name)
	}
	m, err := r.ConfigMapMeta.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		r.RefConfigMaps.Forget(namespace, name)
		// The metadata cache leaves out what is labelled as ours, which
		// the ConfigMaps cache holds whole: another WebApp's config, say.
		return r.ConfigMaps.ConfigMaps(namespace).Get(name)
	}
	if err != nil {
		return nil, err
	}
	return r.RefConfigMaps.Get(ctx, namespace, name, m.ResourceVersion)
}
