package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	handrollv1client "github.com/handroll/handroll/pkg/generated/clientset/versioned/typed/handroll/v1"
	informers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// Options shape the caches.
type Options struct {
	// Namespaces to cache; empty means all. With several, each gets its own
	// informers (a watch cannot span a chosen set of namespaces).
	Namespaces []string
	// ChildSelector is the label selector for the typed objects cached of
	// Deployments, Services and ConfigMaps (trimmed by TrimChild); empty
	// caches them all.
	ChildSelector string
	// MetadataSelector is the label selector of the metadata caches: the
	// complement of ChildSelector, so that each object is cached once,
	// whole or as a Ref, and a child's event is decoded once. Empty caches
	// the metadata of every object. The WebApps' metadata is never
	// filtered.
	MetadataSelector string
	// ConfigMapMetadataAll caches the metadata of every ConfigMap, whatever
	// MetadataSelector says: a sharded range's spec.configMapRef may name a
	// ConfigMap that another range's WebApp owns, which neither that
	// range's ChildSelector nor MetadataSelector selects.
	ConfigMapMetadataAll bool
	// SyncPeriod is the informers' resync period; 0 disables resyncs.
	SyncPeriod time.Duration
	// OperatorNamespace holds the operator's own ConfigMaps (the
	// directory). When Namespaces or ShardSelector leaves it out, its
	// ConfigMaps labelled with OperatorSelector are cached as well.
	OperatorNamespace string
	// OperatorSelector selects the operator's own ConfigMaps in
	// OperatorNamespace; empty: ChildSelector.
	OperatorSelector string
	// ShardSelector, when set, narrows the WebApps' caches to the objects
	// it selects (metav1.ListOptions' shardSelector: pkg/shard). The API
	// server must apply it. The children follow by ChildSelector.
	ShardSelector string
}

// Caches are the informers of one operator: WebApps; the Deployments,
// Services and ConfigMaps it owns, trimmed to what is read of them
// (TrimChild); and the metadata alone of every other Deployment, Service
// and ConfigMap (MetadataSelector). Listers answer from whichever namespace's informer holds the
// object.
//
// The split keeps memory in proportion to handroll's own objects: an
// object is cached as a typed object only when labelled as ours, and of
// the rest (other teams' ConfigMaps, which may be large) only what the
// foreign-name check and the spec.configMapRef watch read: name,
// resourceVersion and the controller's uid (Ref).
type Caches struct {
	namespaces []string // metav1.NamespaceAll alone when watching everything
	extraNS    string   // the operator's namespace, when outside namespaces
	handroll   map[string]informers.SharedInformerFactory
	children   map[string]kubeinformers.SharedInformerFactory // labelled as ours
	metadata   map[string]metadatainformer.SharedInformerFactory
	cmMeta     map[string]metadatainformer.SharedInformerFactory // ConfigMapMetadataAll's; nil: metadata's
	webAppMeta map[string]metadatainformer.SharedInformerFactory // WebApps' metadata, on a recording client
	extra      kubeinformers.SharedInformerFactory               // extraNS's labelled ConfigMaps

	mu       sync.Mutex
	lastErrs map[string]error // informer name → last list/watch error
	named    []namedInformer
}

type namedInformer struct {
	name     string
	informer cache.SharedIndexInformer
}

// New creates the informer factories; the informers themselves exist once
// requested (see the accessors) and run from Start.
func New(kube kubernetes.Interface, handroll clientset.Interface, meta metadata.Interface, o Options) *Caches {
	c := &Caches{
		namespaces: slices.Clone(o.Namespaces),
		handroll:   map[string]informers.SharedInformerFactory{},
		children:   map[string]kubeinformers.SharedInformerFactory{},
		metadata:   map[string]metadatainformer.SharedInformerFactory{},
		webAppMeta: map[string]metadatainformer.SharedInformerFactory{},
		lastErrs:   map[string]error{},
	}
	if len(c.namespaces) == 0 {
		c.namespaces = []string{metav1.NamespaceAll}
	}
	if o.ConfigMapMetadataAll {
		c.cmMeta = map[string]metadatainformer.SharedInformerFactory{}
	}
	for _, ns := range c.namespaces {
		// The WebApps' client records the errors of their lists and
		// watches, and makes their informers list rather than stream
		// (watch-list): objects stored at v1alpha1 need the conversion
		// webhook, and without it the API server's watch cache cannot
		// start; a watch-list then waits on it without an error, while a
		// list, served from etcd, fails at once saying why
		// (AwaitingConversion).
		recording := recordingClient{Interface: handroll, record: c.recorder(informerName(webAppsInformer, ns))}
		c.handroll[ns] = informers.NewSharedInformerFactoryWithOptions(recording, o.SyncPeriod,
			informers.WithNamespace(ns), informers.WithTransform(StripForCache),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.ShardSelector = o.ShardSelector }))
		c.children[ns] = kubeinformers.NewSharedInformerFactoryWithOptions(kube, o.SyncPeriod,
			kubeinformers.WithNamespace(ns), kubeinformers.WithTransform(CompactChild),
			kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = o.ChildSelector }))
		c.metadata[ns] = metadatainformer.NewFilteredSharedInformerFactory(meta, o.SyncPeriod, ns,
			func(lo *metav1.ListOptions) { lo.LabelSelector = o.MetadataSelector })
		// A factory of their own: whether an informer may watch-list is
		// decided per client, and the WebApps' metadata needs the
		// conversion webhook as much as the WebApps do. Unfiltered: a
		// sharded replica needs every WebApp's uid, and a list with a
		// label selector that needs the conversion hangs on the API
		// server instead of failing.
		recordingMeta := recordingMetadata{Interface: meta, record: c.recorder(informerName(metadataName(WebAppsResource), ns))}
		c.webAppMeta[ns] = metadatainformer.NewFilteredSharedInformerFactory(recordingMeta, o.SyncPeriod, ns, nil)
		if c.cmMeta != nil {
			c.cmMeta[ns] = metadatainformer.NewFilteredSharedInformerFactory(meta, o.SyncPeriod, ns, nil)
		}
	}
	if ns := o.OperatorNamespace; ns != "" {
		operator := o.OperatorSelector
		if operator == "" {
			operator = o.ChildSelector
		}
		// Also when the children's selector is not the operator's: a
		// range's children carry a label its own ConfigMaps do not.
		if _, ok := c.factoryNamespace(ns); !ok || operator != o.ChildSelector {
			c.extraNS = ns
			c.extra = kubeinformers.NewSharedInformerFactoryWithOptions(kube, o.SyncPeriod,
				kubeinformers.WithNamespace(ns), kubeinformers.WithTransform(CompactChild),
				kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = operator }))
		}
	}
	return c
}

// configMapInformer is the informer of namespace key's labelled ConfigMaps.
func (c *Caches) configMapInformer(key string) kubeinformers.SharedInformerFactory {
	if key != "" && key == c.extraNS {
		return c.extra
	}
	return c.children[key]
}

// configMapNamespaces are the keys of the ConfigMap informers.
func (c *Caches) configMapNamespaces() []string {
	if c.extraNS == "" {
		return c.namespaces
	}
	return append(slices.Clone(c.namespaces), c.extraNS)
}

// StripForCache drops what handroll never reads from an object before it
// is stored: managedFields and kubectl's last-applied annotation are often
// larger than the rest of the object.
func StripForCache(obj any) (any, error) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb, nil
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, has := a["kubectl.kubernetes.io/last-applied-configuration"]; has {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

// Ref is what a metadata cache keeps of an object: its key, its
// resourceVersion (a referenced ConfigMap's data is fetched again when it
// moves), its controller's uid (whose object holds a child's name) and, of
// a WebApp, its own uid (which shard range holds it).
// These caches hold every object of their kind in the cluster, so the size
// of each entry is what the operator's memory grows with: a Ref with its
// strings is about a quarter of a trimmed PartialObjectMetadata, whose
// ObjectMeta alone is some 300 bytes of fields that would stay empty.
type Ref struct {
	Namespace, Name, ResourceVersion string
	ControllerUID                    types.UID // "" when no controller
	UID                              types.UID // a WebApp's; "" for other kinds
}

// GetObjectMeta lets meta.Accessor, and so the informer's key functions
// and the controllers' handlers, read a Ref as an object. It allocates:
// it is called on events and lookups, not per object held.
func (r *Ref) GetObjectMeta() metav1.Object {
	m := &metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, ResourceVersion: r.ResourceVersion, UID: r.UID}
	if r.ControllerUID != "" {
		m.OwnerReferences = []metav1.OwnerReference{{UID: r.ControllerUID, Controller: ptr.To(true)}}
	}
	return m
}

// PartialObjectMetadata is r as the metadata client's type, for readers
// that check a controller reference.
func (r *Ref) PartialObjectMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: *r.GetObjectMeta().(*metav1.ObjectMeta)}
}

// TrimMetadata turns what the metadata client delivers into a Ref before
// it is stored.
func TrimMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone, or not ours to trim
	}
	r := &Ref{Namespace: intern(m.Namespace), Name: m.Name, ResourceVersion: m.ResourceVersion}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		r.ControllerUID = ref.UID
	}
	return r, nil
}

// trimWebAppMetadata is TrimMetadata for WebApps: their Refs keep their
// own uid too.
func trimWebAppMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone, or trimmed already
	}
	r, err := TrimMetadata(m)
	r.(*Ref).UID = m.UID
	return r, err
}

const webAppsInformer = "handroll.dev/v1 WebApps"

// WebApps returns the WebApp informers, one per namespace.
func (c *Caches) WebApps() []cache.SharedIndexInformer {
	return each(c, webAppsInformer, func(ns string) cache.SharedIndexInformer {
		return c.handroll[ns].Handroll().V1().WebApps().Informer()
	})
}

// Deployments returns the Deployment informers, one per namespace.
func (c *Caches) Deployments() []cache.SharedIndexInformer {
	return each(c, "apps/v1 Deployments", func(ns string) cache.SharedIndexInformer {
		return c.children[ns].Apps().V1().Deployments().Informer()
	})
}

// Services returns the Service informers, one per namespace.
func (c *Caches) Services() []cache.SharedIndexInformer {
	return each(c, "v1 Services", func(ns string) cache.SharedIndexInformer {
		return c.children[ns].Core().V1().Services().Informer()
	})
}

// ConfigMaps returns the informers of the ConfigMaps labelled as ours, one
// per namespace (and one for the operator's namespace).
func (c *Caches) ConfigMaps() []cache.SharedIndexInformer {
	return eachIn(c, c.configMapNamespaces(), "v1 ConfigMaps", func(ns string) cache.SharedIndexInformer {
		return c.configMapInformer(ns).Core().V1().ConfigMaps().Informer()
	})
}

// The resources whose metadata is cached.
var (
	DeploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	ServicesResource    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	ConfigMapsResource  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	WebAppsResource     = handrollv1.SchemeGroupVersion.WithResource(handrollv1.WebAppResource)
)

// metadataFactory is the factory of namespace key's metadata of resource.
func (c *Caches) metadataFactory(key string, resource schema.GroupVersionResource) metadatainformer.SharedInformerFactory {
	switch {
	case c.cmMeta != nil && resource == ConfigMapsResource:
		return c.cmMeta[key]
	case resource == WebAppsResource:
		return c.webAppMeta[key]
	}
	return c.metadata[key]
}

// Metadata returns the informers of resource's metadata (a Ref of every
// object that MetadataSelector selects), one per namespace.
func (c *Caches) Metadata(resource schema.GroupVersionResource) []cache.SharedIndexInformer {
	return each(c, metadataName(resource), func(ns string) cache.SharedIndexInformer {
		inf := c.metadataFactory(ns, resource).ForResource(resource).Informer()
		// The filtered factory takes no transform. Setting it fails only
		// once the informer runs, and then it was set by an earlier call.
		trim := TrimMetadata
		if resource == WebAppsResource {
			trim = trimWebAppMetadata
		}
		_ = inf.SetTransform(trim)
		return inf
	})
}

// metadataName names the informers of resource's metadata.
func metadataName(resource schema.GroupVersionResource) string {
	return resource.GroupVersion().String() + " " + resource.Resource + " (metadata)"
}

// each returns get(ns) for every namespace and, the first time, records the
// informers under a readable name and hooks their list/watch errors.
func each(c *Caches, what string, get func(ns string) cache.SharedIndexInformer) []cache.SharedIndexInformer {
	return eachIn(c, c.namespaces, what, get)
}

func eachIn(c *Caches, namespaces []string, what string, get func(ns string) cache.SharedIndexInformer) []cache.SharedIndexInformer {
	var out []cache.SharedIndexInformer
	for _, ns := range namespaces {
		inf := get(ns)
		out = append(out, inf)
		name := informerName(what, ns)
		c.mu.Lock()
		known := slices.ContainsFunc(c.named, func(n namedInformer) bool { return n.informer == inf })
		if !known {
			c.named = append(c.named, namedInformer{name: name, informer: inf})
		}
		c.mu.Unlock()
		if !known {
			// Keep client-go's logging and backoff, and remember the error
			// so that a sync timeout can say why.
			record := c.recorder(name)
			_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
				record(err)
				cache.DefaultWatchErrorHandler(ctx, r, err)
			})
		}
	}
	return out
}

// informerName is how errors, logs and /readyz name the informer of what in
// namespace ns.
func informerName(what, ns string) string {
	if ns == metav1.NamespaceAll {
		return what + " in all namespaces"
	}
	return what + " in namespace " + ns
}

// recorder returns a func that keeps err as the last error of the
// informer named name.
func (c *Caches) recorder(name string) func(error) {
	return func(err error) {
		c.mu.Lock()
		c.lastErrs[name] = err
		c.mu.Unlock()
	}
}

// recordingClient is a clientset whose WebApp lists and watches hand
// their errors to record.
type recordingClient struct {
	clientset.Interface
	record func(error)
}

// IsWatchListSemanticsUnSupported makes the informers built on r list,
// then watch (client-go's util/watchlist).
func (recordingClient) IsWatchListSemanticsUnSupported() bool { return true }

func (r recordingClient) HandrollV1() handrollv1client.HandrollV1Interface {
	return recordingV1{HandrollV1Interface: r.Interface.HandrollV1(), record: r.record}
}

type recordingV1 struct {
	handrollv1client.HandrollV1Interface
	record func(error)
}

func (r recordingV1) WebApps(namespace string) handrollv1client.WebAppInterface {
	return recordingWebApps{WebAppInterface: r.HandrollV1Interface.WebApps(namespace), record: r.record}
}

type recordingWebApps struct {
	handrollv1client.WebAppInterface
	record func(error)
}

func (r recordingWebApps) List(ctx context.Context, opts metav1.ListOptions) (*handrollv1.WebAppList, error) {
	list, err := r.WebAppInterface.List(ctx, opts)
	if err != nil && ctx.Err() == nil {
		r.record(err)
	}
	return list, err
}

func (r recordingWebApps) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.WebAppInterface.Watch(ctx, opts)
	if err != nil && ctx.Err() == nil {
		r.record(err)
	}
	return w, err
}

// recordingMetadata is recordingClient for the metadata client, whose
// metadata informers list, then watch, too.
type recordingMetadata struct {
	metadata.Interface
	record func(error)
}

// IsWatchListSemanticsUnSupported is read by the metadata informers
// (cache.ToListWatcherWithWatchListSemantics), as recordingClient's is.
func (recordingMetadata) IsWatchListSemanticsUnSupported() bool { return true }

func (r recordingMetadata) Resource(resource schema.GroupVersionResource) metadata.Getter {
	return recordingGetter{Getter: r.Interface.Resource(resource), record: r.record}
}

type recordingGetter struct {
	metadata.Getter
	record func(error)
}

func (r recordingGetter) Namespace(ns string) metadata.ResourceInterface {
	return recordingResource{ResourceInterface: r.Getter.Namespace(ns), record: r.record}
}

func (r recordingGetter) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return recordingResource{ResourceInterface: r.Getter, record: r.record}.List(ctx, opts)
}

func (r recordingGetter) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return recordingResource{ResourceInterface: r.Getter, record: r.record}.Watch(ctx, opts)
}

type recordingResource struct {
	metadata.ResourceInterface
	record func(error)
}

func (r recordingResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := r.ResourceInterface.List(ctx, opts)
	if err != nil && ctx.Err() == nil {
		r.record(err)
	}
	return list, err
}

func (r recordingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ResourceInterface.Watch(ctx, opts)
	if err != nil && ctx.Err() == nil {
		r.record(err)
	}
	return w, err
}

// Start starts every informer requested so far.
func (c *Caches) Start(stop <-chan struct{}) {
	for _, ns := range c.namespaces {
		c.handroll[ns].Start(stop)
		c.children[ns].Start(stop)
		c.metadata[ns].Start(stop)
		c.webAppMeta[ns].Start(stop)
		if c.cmMeta != nil {
			c.cmMeta[ns].Start(stop)
		}
	}
	if c.extra != nil {
		c.extra.Start(stop)
	}
}

// Shutdown stops the informers and waits for their goroutines.
func (c *Caches) Shutdown() {
	for _, ns := range c.namespaces {
		c.handroll[ns].Shutdown()
		c.children[ns].Shutdown()
		c.metadata[ns].Shutdown()
		c.webAppMeta[ns].Shutdown()
		if c.cmMeta != nil {
			c.cmMeta[ns].Shutdown()
		}
	}
	if c.extra != nil {
		c.extra.Shutdown()
	}
}

// HasSynced reports whether every informer requested so far has synced.
func (c *Caches) HasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.named {
		if !n.informer.HasSynced() {
			return false
		}
	}
	return true
}

// Unsynced returns the names of the informers that have not synced yet, in
// the order they were requested ("v1 Services in all namespaces").
func (c *Caches) Unsynced() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, n := range c.named {
		if !n.informer.HasSynced() {
			names = append(names, n.name)
		}
	}
	return names
}

// AwaitingConversion returns, of the informers that have not synced, those
// whose last list failed because the API server could not call the
// conversion webhook of handroll's own CRD (ConversionCallFailed): WebApps
// stored at a version other than the one listed, with no webhook endpoint.
// The operator's replicas serve that webhook; when none is in the webhook
// Service (every replica restarted at once), these informers wait for a
// replica to be published, not for anything this replica lacks.
func (c *Caches) AwaitingConversion() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, n := range c.named {
		if !n.informer.HasSynced() && ConversionCallFailed(c.lastErrs[n.name]) {
			names = append(names, n.name)
		}
	}
	return names
}

// UnsyncedExceptConversion is Unsynced less AwaitingConversion: what a
// replica that serves the conversion webhook waits for before it is ready.
func (c *Caches) UnsyncedExceptConversion() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, n := range c.named {
		if !n.informer.HasSynced() && !ConversionCallFailed(c.lastErrs[n.name]) {
			names = append(names, n.name)
		}
	}
	return names
}

// ConversionCallFailed reports whether err is the API server failing to
// call the conversion webhook of handroll's CRD at all: no endpoint, a
// refused connection, a timeout. apiextensions-apiserver words it
// "conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: "
// followed by the *url.Error of the call (Post "https://..."); a webhook
// that answered with a failure is not such an error, since publishing
// another replica would not change the answer.
func ConversionCallFailed(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	i := strings.Index(msg, "conversion webhook for "+handrollv1.SchemeGroupVersion.Group+"/")
	if i < 0 {
		return false
	}
	_, after, ok := strings.Cut(msg[i:], ", Kind="+handrollv1.WebAppKind+" failed: ")
	return ok && strings.HasPrefix(after, `Post "`)
}

// WaitForSync waits until every informer has synced, or ctx ends. The error
// names each informer that had not synced and the last error its list or
// watch met (for example RBAC forbidding the list).
func (c *Caches) WaitForSync(ctx context.Context) error {
	// Polled every 10 ms rather than WaitForCacheSync's 100 ms: the start
	// (and a cold standby's takeover) waits for the poll, not the list.
	if wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.HasSynced(), nil
	}) == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, n := range c.named {
		if n.informer.HasSynced() {
			continue
		}
		why := "no error seen yet (the list is slow, or the API server unreachable)"
		if err := c.lastErrs[n.name]; err != nil {
			why = err.Error()
		}
		errs = append(errs, fmt.Errorf("%s did not sync: %s", n.name, why))
	}
	return errors.Join(errs...)
}

// Listers that answer from the informer of the object's namespace.

// WebAppLister returns a lister over every namespace's WebApp informer.
func (c *Caches) WebAppLister() handrolllisters.WebAppLister {
	return webAppLister{c}
}

// DeploymentLister returns a lister over every namespace's Deployments.
func (c *Caches) DeploymentLister() appslisters.DeploymentLister { return deploymentLister{c} }

// ServiceLister returns a lister over every namespace's Services.
func (c *Caches) ServiceLister() corelisters.ServiceLister { return serviceLister{c} }

// ServiceMeta reads every namespace's Services for their metadata alone,
// decoding nothing: for the directory, which reads only their owners.
func (c *Caches) ServiceMeta() ObjectMetaGetter { return serviceMeta{c} }

// ConfigMapLister returns a lister over every namespace's ConfigMaps
// labelled as ours.
func (c *Caches) ConfigMapLister() corelisters.ConfigMapLister { return configMapLister{c} }

// MetadataLister returns a lister over every namespace's metadata of
// resource (see Metadata).
func (c *Caches) MetadataLister(resource schema.GroupVersionResource) MetadataLister {
	return metadataLister{c: c, resource: resource}
}

// factoryNamespace is the key of the factory that caches namespace ns, or
// false when ns is not cached at all.
func (c *Caches) factoryNamespace(ns string) (string, bool) {
	if len(c.namespaces) == 1 && c.namespaces[0] == metav1.NamespaceAll {
		return metav1.NamespaceAll, true
	}
	return ns, slices.Contains(c.namespaces, ns)
}
