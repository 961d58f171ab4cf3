package shard

import (
	"slices"
	"strconv"
)

// Assign gives each of n ranges to one of members, so that no member holds
// more than ceil(n / len(members)). It is a function of n and the set of
// members alone, so every replica that sees the same members computes the
// same assignment; and it is rendezvous hashing with a cap, so a member
// joining or leaving moves few ranges besides its own share. The result
// maps each member to its range indexes, in order; nil without members.
func Assign(n int, members []string) map[string][]int {
	if len(members) == 0 || n < 1 {
		return nil
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	limit := (n + len(ms) - 1) / len(ms)
	out := make(map[string][]int, len(ms))
	for _, m := range ms {
		out[m] = nil
	}
	for i := range n {
		best, bestScore := "", uint64(0)
		for _, m := range ms {
			if len(out[m]) >= limit {
				continue
			}
			if s := Hash(strconv.Itoa(i) + "/" + m); best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		out[best] = append(out[best], i)
	}
	return out
}
