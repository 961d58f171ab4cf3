package webapp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// DirectoryName is the ConfigMap, in the operator's namespace, that maps
// every WebApp to its URL. Keys are "<namespace>.<name>": neither a
// namespace nor a WebApp name can hold a dot, and a ConfigMap key cannot
// hold a slash.
//
// A ConfigMap holds at most 1 MiB, so the directory is split into P parts,
// P a power of two: part 0 is this ConfigMap, part i > 0 the ConfigMap
// DirectoryPartName(i). Part 0's annotation DirectoryPartsAnnotation says P
// (absent: 1, so a directory of one part is a single plain ConfigMap). Key k
// is in part DirectoryPart(k, P). To look an entry up, read part 0, then the
// part its key hashes to: LookupDirectory. P only grows; while it does, an
// entry stays where the old P puts it until part 0 says the new P.
const DirectoryName = "webapp-directory"

// DirectoryPartsAnnotation, on part 0 of the directory, is its number of
// parts in decimal.
const DirectoryPartsAnnotation = "handroll.dev/directory-parts"

// DirectoryPartBytes is what a part holds on average (keys and values) at
// most: P grows when the entries pass P times this. A quarter of the
// ConfigMap limit leaves room for an uneven hash and for growth until the
// next resize.
const DirectoryPartBytes = 256 << 10

// DirectoryPartName is the ConfigMap name of part i of the directory.
func DirectoryPartName(i int) string {
	if i == 0 {
		return DirectoryName
	}
	return DirectoryName + "-" + strconv.Itoa(i)
}

// DirectoryPartIndex tells which part of the directory a ConfigMap name is,
// the inverse of DirectoryPartName; false for any other name.
func DirectoryPartIndex(name string) (int, bool) {
	if name == DirectoryName {
		return 0, true
	}
	digits, ok := strings.CutPrefix(name, DirectoryName+"-")
	if !ok || digits == "" || digits[0] == '0' || len(digits) > 9 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(digits)
	return i, err == nil
}

// DirectoryPart is the part, of parts (a power of two), that holds key: its
// 32-bit FNV-1a hash (hash/fnv New32a over the key's bytes) modulo parts. As
// parts doubles, a key stays in its part or moves to that part plus the old
// parts, never to another part that is read already.
func DirectoryPart(key string, parts int) int {
	if parts <= 1 {
		return 0
	}
	const offset32, prime32 = 2166136261, 16777619 // hash/fnv's, inlined: no allocation per key
	h := uint32(offset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= prime32
	}
	return int(h % uint32(parts))
}

// DirectoryParts reads P from part 0's annotations: 1 when absent, an error
// when it is not a power of two.
func DirectoryParts(annotations map[string]string) (int, error) {
	v, ok := annotations[DirectoryPartsAnnotation]
	if !ok {
		return 1, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p&(p-1) != 0 {
		return 0, fmt.Errorf("annotation %s=%q: want a power of two", DirectoryPartsAnnotation, v)
	}
	return p, nil
}

// DirectoryPartsAnnotationFor is the value part 0's DirectoryPartsAnnotation
// is to take to say parts (nil: none), and whether that changes
// annotations. One part is said by no annotation, as before the directory
// had parts; a "1" found there is left as it is.
func DirectoryPartsAnnotationFor(annotations map[string]string, parts int) (value *string, change bool) {
	v, ok := annotations[DirectoryPartsAnnotation]
	if parts <= 1 {
		return nil, ok && v != "1"
	}
	want := strconv.Itoa(parts)
	return &want, v != want
}

// DirectoryPartsFor is the number of parts for entries of size bytes (keys
// and values): the smallest power of two, and at least current, that keeps
// the average part within DirectoryPartBytes. Never fewer than current:
// processes that share the directory must agree, and only growing is safe.
func DirectoryPartsFor(bytes, current int) int {
	p := 1
	for p < current || bytes > p*DirectoryPartBytes {
		p *= 2
	}
	return p
}

// LegacyFinalizerDirectory is the finalizer the first version of the
// directory put on every WebApp, to remove its entry before the WebApp went.
// The directory no longer needs it (DirectoryReconciler removes an entry
// on its WebApp's delete event, tombstones included, and on any rebuild
// from the cache), so nothing adds it; the WebApp reconciler
// strips it wherever it finds it: on WebApps written by that version, and on
// exported YAML created again.
const LegacyFinalizerDirectory = "handroll.dev/directory"

// DirectoryKey is a WebApp's key in the directory ConfigMap.
func DirectoryKey(namespace, name string) string { return namespace + "." + name }

// DesiredDirectory is the directory that webapps call for: an entry for
// every WebApp that is not being deleted and whose Service, as serviceOf
// finds its metadata (nil: none), it controls. A WebApp whose Service is
// not made yet, or whose Service's name is taken by an object it does not
// control, is not advertised. It is pure, so the controller-runtime twin
// uses it too.
func DesiredDirectory(webapps []*handrollv1.WebApp, serviceOf func(namespace, name string) metav1.Object) map[string]string {
	entries := make(map[string]string, len(webapps))
	for _, w := range webapps {
		if url, ok := directoryEntry(w, serviceOf); ok {
			entries[DirectoryKey(w.Namespace, w.Name)] = url
		}
	}
	return entries
}

// directoryEntry is w's entry in DesiredDirectory, if it has one: the
// one rule for the full rebuild and for the incremental reconcile alike.
func directoryEntry(w *handrollv1.WebApp, serviceOf func(namespace, name string) metav1.Object) (string, bool) {
	if w.DeletionTimestamp != nil {
		return "", false
	}
	if svc := serviceOf(w.Namespace, w.Name); svc == nil || !metav1.IsControlledBy(svc, w) {
		return "", false
	}
	return URL(w), true
}

// ManagedDirectoryKeys tells which directory keys a process that watches
// namespaces keeps: those of its namespaces, every key when it watches all
// (namespaces empty or [""]). Processes with --namespaces of their own can
// share one operator namespace, and so one directory, without removing each
// other's entries.
func ManagedDirectoryKeys(namespaces []string) func(key string) bool {
	if len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) {
		return func(string) bool { return true }
	}
	watched := map[string]bool{}
	for _, ns := range namespaces {
		watched[ns] = true
	}
	return func(key string) bool {
		ns, _, ok := strings.Cut(key, ".")
		return ok && watched[ns]
	}
}

// DirectoryChanges is what turns current into desired, for the keys that
// manages says are ours: the value to set, or nil to remove the key. Empty
// when nothing differs. Its JSON is the "data" of a merge patch.
func DirectoryChanges(current, desired map[string]string, manages func(key string) bool) map[string]*string {
	changes := map[string]*string{}
	for k, v := range desired {
		if got, ok := current[k]; !ok || got != v {
			set := v // a copy only here: &v would put every v on the heap
			changes[k] = &set
		}
	}
	for k := range current {
		if _, ok := desired[k]; !ok && manages(k) {
			changes[k] = nil
		}
	}
	return changes
}

// DirectoryPlan is one step of the directory towards the desired entries.
type DirectoryPlan struct {
	// Parts is the P that part 0 is to say after this step. When it grows,
	// part 0 is to be written last, and only once every other write of the
	// step has gone through.
	Parts int
	// Changes are, by part number, what to write to each part, as
	// DirectoryChanges gives it; nil for a part left as it is.
	Changes []map[string]*string
}

// PlanDirectory is the next step from the directory as a cache holds it to
// desired. parts is the P that part 0 says, 0 when there is no part 0;
// current holds each part's entries by number. Keys that manages does not
// claim are another process's: never removed, never written from desired,
// only copied along as P grows.
//
// P grows in two steps, so that a reader who follows part 0 never misses an
// entry it found before:
//
//  1. every entry a reader finds is copied to its part under the new P, new
//     entries go only to parts nobody reads yet (the parts read now gain no
//     key, so none outgrows the ConfigMap limit meanwhile), and then part 0
//     says the new P;
//  2. the next step, from a cache that shows the new P, removes entries from
//     the parts where they no longer belong, and adds the new entries of the
//     parts read before.
//
// Parts from P on are read by nobody and left alone, except while P grows
// into them. The step is O(entries).
func PlanDirectory(parts int, current map[int]map[string]string, desired map[string]string, manages func(key string) bool) DirectoryPlan {
	desired = onlyManaged(desired, manages)
	read := max(parts, 1)
	size := 0
	for k, v := range desired {
		size += len(k) + len(v)
	}
	// Other processes' entries, where a reader finds them.
	others := map[string]string{}
	if parts > 0 {
		for i := range read {
			for k, v := range current[i] {
				if !manages(k) && DirectoryPart(k, read) == i {
					others[k] = v
					size += len(k) + len(v)
				}
			}
		}
	}
	target := DirectoryPartsFor(size, parts)
	growing := parts > 0 && target > parts

	want := make([]map[string]string, target)
	for i := range want {
		want[i] = make(map[string]string, len(desired)/target+len(desired)/target/4) // room for an uneven hash
	}
	for k, v := range desired {
		home := DirectoryPart(k, target)
		if !growing {
			want[home][k] = v
			continue
		}
		// target is a multiple of parts: home is old, or a part not read yet.
		if old := DirectoryPart(k, parts); hasKey(current[old], k) {
			want[old][k] = v
		}
		if home >= parts {
			want[home][k] = v
		}
	}
	if growing {
		for k, v := range others {
			if home := DirectoryPart(k, target); home >= parts {
				want[home][k] = v
			}
		}
	}

	plan := DirectoryPlan{Parts: target, Changes: make([]map[string]*string, target)}
	for i := range target {
		if c := DirectoryChanges(current[i], want[i], manages); len(c) > 0 {
			plan.Changes[i] = c
		}
	}
	return plan
}

// onlyManaged is desired without the keys manages does not claim. A cache
// can hold other processes' WebApps (every range's, with --shards filtered
// on the client), and its view of them may lag their owner's: writing
// them would put back an entry their owner has just removed. desired
// itself when every key is claimed, the usual case, at no copy.
func onlyManaged(desired map[string]string, manages func(key string) bool) map[string]string {
	all := true
	for k := range desired {
		if !manages(k) {
			all = false
			break
		}
	}
	if all {
		return desired
	}
	out := make(map[string]string, len(desired))
	for k, v := range desired {
		if manages(k) {
			out[k] = v
		}
	}
	return out
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// LookupDirectory finds the URL of WebApp webappNamespace/webappName in the
// directory of namespace (the operator's), the way a reader should: part 0,
// the P it says, then the part the key hashes to. On a miss it reads part 0
// again, and looks again if P has grown meanwhile.
func LookupDirectory(ctx context.Context, kube kubernetes.Interface, namespace, webappNamespace, webappName string) (url string, found bool, err error) {
	key := DirectoryKey(webappNamespace, webappName)
	configMaps := kube.CoreV1().ConfigMaps(namespace)
	missedAt := 0 // the P of the last miss
	for range 3 {
		part0, getErr := configMaps.Get(ctx, DirectoryName, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return "", false, nil
		}
		if getErr != nil {
			return "", false, getErr
		}
		parts, partsErr := DirectoryParts(part0.Annotations)
		if partsErr != nil {
			return "", false, fmt.Errorf("the directory's part 0: %w", partsErr)
		}
		if parts == missedAt {
			return "", false, nil
		}
		i := DirectoryPart(key, parts)
		if i == 0 {
			// P and the entries come from one object: no race to look for.
			url, found = part0.Data[key]
			return url, found, nil
		}
		part, getErr := configMaps.Get(ctx, DirectoryPartName(i), metav1.GetOptions{})
		if getErr == nil {
			if url, found = part.Data[key]; found {
				return url, true, nil
			}
		} else if !apierrors.IsNotFound(getErr) {
			return "", false, getErr
		}
		missedAt = parts
	}
	return "", false, nil
}
