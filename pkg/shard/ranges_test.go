package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/uuid"
)

func TestRangesCoverTheHashSpaceOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 12, 64, 255, 256} {
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
		// Whole buckets, equal to within one bucket.
		width := math.Pow(2, 64) / float64(n)
		for _, r := range rs {
			w := float64(r.End - r.Start)
			if r.Index == n-1 {
				w = math.Pow(2, 64) - float64(r.Start)
			}
			if r.Start%(1<<56) != 0 || math.Abs(w-width) >= 1<<56 {
				t.Errorf("n=%d: range %v starts at %#x and is %.0f wide, want whole buckets and %.0f", n, r, r.Start, w, width)
			}
		}
	}
	for _, n := range []int{0, Buckets + 1} {
		if _, err := Ranges(n); err == nil {
			t.Errorf("Ranges(%d) succeeded", n)
		}
	}
}

// TestOfAgreesWithContains: the range Of picks is the one range that
// contains the hash, at the edges of every range too.
func TestOfAgreesWithContains(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 12, 100, 256} {
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

// TestSameHashAsTheAPIServer: a WebApp is in a range exactly when
// apimachinery's shard selector, which the API server evaluates, matches
// it; and its children's bucket label exactly when the range's child
// selector does.
func TestSameHashAsTheAPIServer(t *testing.T) {
	rs, _ := Ranges(12)
	for range 500 {
		uid := uuid.NewUUID()
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-00", Name: "x", UID: uid}}
		if got, want := fmt.Sprintf("%016x", Hash(string(uid))), sharding.HashField(string(uid)); got != want {
			t.Fatalf("Hash(%q) = %s, apimachinery %s", uid, got, want)
		}
		child := labels.Set{BucketLabel: Bucket(uid)}
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
			want := Of(uid, 12) == r.Index
			if match != want || r.Holds(uid) != want {
				t.Fatalf("%s in %v: the API server's selector says %v, Of says %v, Holds %v", uid, r, match, want, r.Holds(uid))
			}
			childSel, err := labels.Parse(r.ChildSelector())
			if err != nil {
				t.Fatalf("%v: child selector %q: %v", r, r.ChildSelector(), err)
			}
			if got := childSel.Matches(child); got != want {
				t.Fatalf("%s's child (bucket %s) in %v: the child selector says %v, Of says %v", uid, Bucket(uid), r, got, want)
			}
			if sel.String() != r.Selector() {
				t.Fatalf("selector %q, apimachinery writes %q", r.Selector(), sel.String())
			}
		}
	}
}
