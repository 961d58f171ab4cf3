// Package shard splits the WebApps between replicas: the 64-bit FNV-1a hash
// space of a WebApp's uid is cut into ranges of whole buckets (its hash's
// top byte), each range is assigned to one live replica, and each replica
// lists and watches only its ranges: the WebApps through the API server's
// shardSelector on the uid (KEP-5866, the ShardedListAndWatch feature
// gate) when it serves it, and their children by the bucket label the
// reconciler puts on them (BucketLabel); or it filters on the client with
// the same hash when the server does not.
//
// Manager piece replaced: none. controller-runtime's Manager runs every
// controller on one leader and has no way to split one controller's
// objects between replicas (docs/sharding.md).
//
// Why the uid and not the namespace: the API server's hash barely moves
// its high bits for names that differ at the end, so namespaces numbered
// team-00 to team-29 all fell in one range of 12, and one namespace was
// one range however large. A uid is random. Its cost: a child's own uid
// says nothing of its owner's range, so each child carries its owner's
// bucket in a label, written once (on its metadata, never on a pod
// template, so no pod rolls). The bucket does not depend on the number of
// ranges: changing --shards rewrites no label.
package shard
