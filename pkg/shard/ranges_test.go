package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
)

func TestRangesCoverTheHashSpaceOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 12, 64, 1000} {
		rs, err := Ranges(n)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Start != 0 || rs[n-1].End != 0 {
			t.Errorf("n=%d: ranges start at %#x and end at %#x, want 0 and 2^64 (0)", n, rs[0].Start, rs[n-1].End)
		}
		for i := 1; i < n; i++ {
			if rs[i].Start != rs[i-1].End || rs[i].Start <= rs[i-1].Start {
				t.Errorf("n=%d: range %d starts at %#x, range %d ends at %#x", n, i, rs[i].Start, i-1, rs[i-1].End)
			}
		}
		// Equal to within one hash.
		width := math.Pow(2, 64) / float64(n)
		for _, r := range rs[:n-1] {
			if d := float64(r.End-r.Start) - width; d > 1 || d < -1 {
				t.Errorf("n=%d: range %v is %d wide, want %.0f", n, r, r.End-r.Start, width)
			}
		}
	}
	if _, err := Ranges(0); err == nil {
		t.Error("Ranges(0) succeeded")
	}
}

// TestOfAgreesWithContains: the range Of picks is the one range that
// contains the hash, at the edges of every range too.
func TestOfAgreesWithContains(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 12, 1000} {
		rs, _ := Ranges(n)
		hashes := []uint64{0, math.MaxUint64}
		for _, r := range rs {
			hashes = append(hashes, r.Start, r.Start-1, r.Start+1)
		}
		for range 2000 {
			hashes = append(hashes, rng.Uint64())
		}
		for _, h := range hashes {
			i := ofHash(h, n)
			var holders []int
			for _, r := range rs {
				if r.Contains(h) {
					holders = append(holders, r.Index)
				}
			}
			if len(holders) != 1 || holders[0] != i {
				t.Fatalf("n=%d, hash %#x: Of says %d, the ranges containing it are %v", n, h, i, holders)
			}
		}
	}
}

// TestSameHashAsTheAPIServer: a namespace is in a range exactly when
// apimachinery's shard selector, which the API server evaluates, matches
// an object of that namespace.
func TestSameHashAsTheAPIServer(t *testing.T) {
	rs, _ := Ranges(12)
	for i := range 500 {
		ns := fmt.Sprintf("team-%d", i)
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
		if got, want := fmt.Sprintf("%016x", Hash(ns)), sharding.HashField(ns); got != want {
			t.Fatalf("Hash(%q) = %s, apimachinery %s", ns, got, want)
		}
		for _, r := range rs {
			end := fmt.Sprintf("0x%016x", r.End)
			if r.Index == r.Count-1 {
				end = "0x10000000000000000"
			}
			sel := sharding.NewSelector(sharding.ShardRangeRequirement{Key: Key, Start: fmt.Sprintf("0x%016x", r.Start), End: end})
			match, err := sel.Matches(obj)
			if err != nil {
				t.Fatal(err)
			}
			if want := Of(ns, 12) == r.Index; match != want {
				t.Fatalf("%s in %v: the API server's selector says %v, Of says %v", ns, r, match, want)
			}
			if sel.String() != r.Selector() {
				t.Fatalf("selector %q, apimachinery writes %q", r.Selector(), sel.String())
			}
		}
	}
}
