// Command shardbalance measures how evenly pkg/shard spreads WebApps over
// replicas by their uid, against hashing their namespace as earlier
// versions did: the measurement behind pkg/shard's choice of key.
//
//	go run ./hack/shardbalance [-namespaces 30] [-webapps 600] [-ranges 12] [-replicas 3] [-trials 1000]
//
// Each trial draws fresh namespace names and uids; the load of a replica is
// the WebApps in the ranges Assign gives it. It prints the heaviest
// replica's load over the ideal (webapps / replicas): its median, 90th
// percentile and worst over the trials, for each key; and the same for
// namespaces numbered at the end (team-00, team-01, ...), drawn once.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/handroll/handroll/pkg/shard"
)

func main() {
	namespaces := flag.Int("namespaces", 30, "Namespaces the WebApps are spread over, evenly.")
	webapps := flag.Int("webapps", 600, "WebApps in all.")
	ranges := flag.Int("ranges", 12, "Ranges (--shards).")
	replicas := flag.Int("replicas", 3, "Live replicas.")
	trials := flag.Int("trials", 1000, "Draws of namespace names and uids.")
	flag.Parse()
	if *namespaces < 1 || *webapps < *namespaces || *ranges < 1 || *replicas < 1 || *trials < 1 {
		fmt.Fprintln(os.Stderr, "shardbalance: every count must be positive, and webapps at least namespaces")
		os.Exit(2)
	}
	members := make([]string, *replicas)
	for i := range members {
		members[i] = fmt.Sprintf("replica-%d", i)
	}
	owner := make([]int, *ranges)
	for m, rs := range shard.Assign(*ranges, members) {
		for _, r := range rs {
			owner[r] = slices.Index(members, m)
		}
	}
	ideal := float64(*webapps) / float64(*replicas)
	var byNamespace, byUID []float64
	for range *trials {
		nsLoad := make([]int, *replicas)
		uidLoad := make([]int, *replicas)
		names := make([]string, *namespaces)
		for i := range names {
			names[i] = "team-" + random()
		}
		for i := range *webapps {
			nsLoad[owner[namespaceRange(names[i%*namespaces], *ranges)]]++
			uidLoad[owner[shard.Of(uuid.NewUUID(), *ranges)]]++
		}
		byNamespace = append(byNamespace, float64(slices.Max(nsLoad))/ideal)
		byUID = append(byUID, float64(slices.Max(uidLoad))/ideal)
	}
	// Namespaces numbered at the end, as people name them: FNV-1a, the API
	// server's hash, carries a change in the last bytes only weakly into
	// the high bits that pick the range.
	load := make([]int, *replicas)
	for i := range *webapps {
		load[owner[namespaceRange(fmt.Sprintf("team-%02d", i%*namespaces), *ranges)]]++
	}
	numbered := float64(slices.Max(load)) / ideal

	fmt.Printf("%d WebApps in %d namespaces, %d ranges, %d replicas, %d trials\n", *webapps, *namespaces, *ranges, *replicas, *trials)
	fmt.Println("heaviest replica / ideal   median   p90    worst")
	for _, row := range []struct {
		key string
		v   []float64
	}{{"namespace", byNamespace}, {"uid", byUID}} {
		slices.Sort(row.v)
		fmt.Printf("%-26s %6.2f %6.2f %6.2f\n", row.key, row.v[len(row.v)/2], row.v[len(row.v)*9/10], row.v[len(row.v)-1])
	}
	fmt.Printf("namespace, team-00 to team-%02d: %.2f (loads %v)\n", *namespaces-1, numbered, load)
}

// namespaceRange is the range of n that held a namespace in earlier versions:
// the hash space cut into n equal ranges, floor(hash * n / 2^64).
func namespaceRange(namespace string, n int) int {
	hi, _ := bits.Mul64(shard.Hash(namespace), uint64(n))
	return int(hi)
}

// random is 16 hex digits, a namespace's suffix.
func random() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
