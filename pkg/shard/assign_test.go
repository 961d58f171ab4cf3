package shard

import (
	"fmt"
	"slices"
	"testing"
)

func members(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("replica-%d", i)
	}
	return out
}

func TestAssignGivesEveryRangeOnceWithinTheCap(t *testing.T) {
	for _, n := range []int{1, 5, 12, 64} {
		for k := 1; k <= 7; k++ {
			got := Assign(n, members(k))
			limit := (n + k - 1) / k
			seen := make([]int, n)
			for m, rs := range got {
				if len(rs) > limit {
					t.Errorf("n=%d, %d members: %s holds %d ranges, more than %d", n, k, m, len(rs), limit)
				}
				for _, r := range rs {
					seen[r]++
				}
			}
			for r, c := range seen {
				if c != 1 {
					t.Errorf("n=%d, %d members: range %d assigned %d times", n, k, r, c)
				}
			}
		}
	}
	if Assign(12, nil) != nil {
		t.Error("ranges assigned to no member")
	}
}

func TestAssignDependsOnTheSetOfMembersOnly(t *testing.T) {
	a := Assign(12, []string{"b", "a", "c"})
	b := Assign(12, []string{"c", "a", "b", "a"})
	for m, rs := range a {
		if !slices.Equal(rs, b[m]) {
			t.Errorf("%s: %v from one order, %v from another", m, rs, b[m])
		}
	}
}

// TestAssignMovesLittle: when a member joins or leaves, the ranges that
// change hands are about the share that must move, not most of them.
func TestAssignMovesLittle(t *testing.T) {
	const n = 12
	owner := func(a map[string][]int) []string {
		out := make([]string, n)
		for m, rs := range a {
			for _, r := range rs {
				out[r] = m
			}
		}
		return out
	}
	for k := 1; k <= 5; k++ {
		before := owner(Assign(n, members(k)))
		after := owner(Assign(n, members(k+1)))
		moved := 0
		for i := range before {
			if before[i] != after[i] {
				moved++
			}
		}
		// The new member must get n/(k+1) ranges; allow as many again for
		// the cap pushing ranges along.
		if need := n / (k + 1); moved > 2*need+1 {
			t.Errorf("%d → %d members: %d of %d ranges moved, %d had to", k, k+1, moved, n, need)
		}
		t.Logf("%d → %d members: %d of %d ranges moved", k, k+1, moved, n)
	}
}
