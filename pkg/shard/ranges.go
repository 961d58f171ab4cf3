package shard

import (
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Key is the field a WebApp is hashed on, in the shardSelector's syntax:
// its uid, random, so the split does not depend on how anything is named.
const Key = "object.metadata.uid"

// Buckets is how many parts the hash space is first cut into: a WebApp's
// bucket is its hash's top byte. A range is a run of whole buckets, so that
// a child, which carries its owner's bucket in BucketLabel, can be
// selected with its owner's range by a label selector. The bucket does not
// depend on the number of ranges: changing --shards rewrites no label.
const Buckets = 256

// BucketLabel, on each child of a WebApp reconciled by sharded replicas,
// is its owner's bucket (Bucket): the range's caches select the children
// by it. It is on the child's metadata only, never on a pod template, so
// writing it rolls no pod.
const BucketLabel = "handroll.dev/shard-bucket"

// Range is one of Count parts of the hash space: the hashes h with Start <=
// h < End, where End 0 of the last range stands for 2^64. Each is a run of
// whole buckets, as equal as Buckets allows.
type Range struct {
	Index, Count int
	Start, End   uint64
}

// Ranges cuts the hash space into n runs of buckets: 1 <= n <= Buckets.
func Ranges(n int) ([]Range, error) {
	if n < 1 || n > Buckets {
		return nil, fmt.Errorf("%d ranges: there must be between 1 and %d", n, Buckets)
	}
	out := make([]Range, n)
	for i := range out {
		out[i] = Range{Index: i, Count: n, Start: bound(i, n), End: bound(i+1, n)}
	}
	return out, nil
}

// firstBucket is the first bucket of range i of n: ceil(i * Buckets / n).
func firstBucket(i, n int) int { return (i*Buckets + n - 1) / n }

// bound is range i's first hash, 0 for i = n (2^64 wraps to 0).
func bound(i, n int) uint64 {
	if i == n {
		return 0
	}
	return uint64(firstBucket(i, n)) << 56
}

// Contains reports whether the hash h falls in r.
func (r Range) Contains(h uint64) bool {
	return h >= r.Start && (r.Index == r.Count-1 || h < r.End)
}

// Holds reports whether the WebApp of this uid is r's.
func (r Range) Holds(uid types.UID) bool { return r.Contains(Hash(string(uid))) }

// String is the range as the journal and the logs name it: "3/12".
func (r Range) String() string { return fmt.Sprintf("%d/%d", r.Index, r.Count) }

// Selector is r as a shardSelector expression, for the WebApps.
func (r Range) Selector() string {
	end := fmt.Sprintf("0x%016x", r.End)
	if r.Index == r.Count-1 {
		end = "0x10000000000000000"
	}
	return fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", Key, r.Start, end)
}

// Selector is the union of rs, for one list or watch over several ranges.
func Selector(rs ...Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Selector()
	}
	return strings.Join(parts, " || ")
}

// ChildSelector is the label requirement that selects the children of r's
// WebApps: their BucketLabel is one of r's buckets.
func (r Range) ChildSelector() string {
	var values []string
	for b := firstBucket(r.Index, r.Count); b < firstBucket(r.Index+1, r.Count); b++ {
		values = append(values, bucketValue(b))
	}
	return BucketLabel + " in (" + strings.Join(values, ",") + ")"
}

// Hash is the API server's hash of a field's value: 64-bit FNV-1a of its
// bytes (k8s.io/apimachinery/pkg/sharding HashField).
func Hash(value string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(value))
	return h.Sum64()
}

// Bucket is the BucketLabel value of the children of the WebApp of uid:
// its hash's top byte, in two hex digits.
func Bucket(uid types.UID) string { return bucketValue(int(Hash(string(uid)) >> 56)) }

func bucketValue(b int) string { return fmt.Sprintf("%02x", b) }

// Of returns the index of the range, of n, that holds the WebApp of uid.
func Of(uid types.UID, n int) int { return ofHash(Hash(string(uid)), n) }

// ofHash is the range of n holding h: the last whose first bucket is at
// most h's, i with ceil(i * Buckets / n) <= b, so floor(b * n / Buckets).
func ofHash(h uint64, n int) int { return int(h>>56) * n / Buckets }
