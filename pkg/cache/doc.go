// Package cache builds the informers handroll reads from, over all
// namespaces or a chosen few, and waits for them to sync.
//
// Manager piece replaced: cluster.New's cache and its cache.Options —
// DefaultNamespaces (one informer factory per namespace), ByObject label
// selectors (children cached whole only when labelled as ours),
// builder.OnlyMetadata (the metadata alone of every other Deployment,
// Service and ConfigMap, through the metadata client, with the complement
// of the children's label selector: each object is cached once), DefaultTransform
// (managedFields and the last-applied annotation dropped before objects are
// stored, and of WebApps before they are even decoded: InformerClient; the
// children trimmed to what is read, and kept encoded: Child),
// SyncPeriod — and WaitForCacheSync, with an error that names the
// informer that did not sync and the last error its list or watch met.
package cache
