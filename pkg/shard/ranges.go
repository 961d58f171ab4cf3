package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
)

// Key is the field a WebApp and its children are hashed on, in the
// shardSelector's syntax.
const Key = "object.metadata.namespace"

// Range is one of Count equal parts of the hash space: the hashes h with
// Start <= h < End, where End 0 of the last range stands for 2^64.
type Range struct {
	Index, Count int
	Start, End   uint64
}

// Ranges cuts the hash space into n ranges as equal as integers allow.
func Ranges(n int) ([]Range, error) {
	if n < 1 {
		return nil, fmt.Errorf("%d ranges: there must be at least one", n)
	}
	out := make([]Range, n)
	for i := range out {
		out[i] = Range{Index: i, Count: n, Start: bound(i, n), End: bound(i+1, n)}
	}
	return out, nil
}

// bound is floor(i * 2^64 / n), 0 for i = n (2^64 wraps to 0).
func bound(i, n int) uint64 {
	if i == n {
		return 0
	}
	q, _ := bits.Div64(uint64(i), 0, uint64(n)) // (i << 64) / n, i < n
	return q
}

// Contains reports whether the hash h falls in r.
func (r Range) Contains(h uint64) bool {
	return h >= r.Start && (r.Index == r.Count-1 || h < r.End)
}

// String is the range as the journal and the logs name it: "3/12".
func (r Range) String() string { return fmt.Sprintf("%d/%d", r.Index, r.Count) }

// Selector is r as a shardSelector expression.
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

// Hash is the API server's hash of a field's value: 64-bit FNV-1a of its
// bytes (k8s.io/apimachinery/pkg/sharding HashField).
func Hash(value string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(value))
	return h.Sum64()
}

// Of returns the index of the range, of n, that holds namespace.
func Of(namespace string, n int) int { return ofHash(Hash(namespace), n) }

func ofHash(h uint64, n int) int {
	// The range holding h is the largest i with bound(i, n) <= h: that is
	// floor(h * n / 2^64) or the one after it, as bound rounds down.
	hi, _ := bits.Mul64(h, uint64(n))
	i := int(hi)
	if i+1 < n && bound(i+1, n) <= h {
		i++
	}
	return i
}
