// Package shard splits the WebApps between replicas: the 64-bit FNV-1a hash
// space of a WebApp's namespace is cut into equal ranges, each range is
// assigned to one live replica, and each replica lists and watches only its
// ranges, through the API server's shardSelector (KEP-5866, the
// ShardedListAndWatch feature gate) when it serves it, or by filtering on
// the client with the same hash when it does not.
//
// Manager piece replaced: none. controller-runtime's Manager runs every
// controller on one leader and has no way to split one controller's
// objects between replicas (docs/sharding.md).
//
// Why the namespace and not the uid: a WebApp's children live in its
// namespace, so one selector per range narrows every cache (WebApps,
// Deployments, Services, ConfigMaps) to the same objects, and a child event
// reaches the replica that owns its WebApp with no relabelling. A uid split
// spreads one namespace over every replica, but a child's uid says nothing
// of its owner's range, so each replica would have to cache every child.
// The cost: one namespace is one range, and a few large namespaces balance
// less evenly (Balance measures it).
package shard
