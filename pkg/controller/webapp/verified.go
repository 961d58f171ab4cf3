package webapp

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// inputs is everything a WebApp's desired children are made from: the
// owner's uid (the ownerReference), its generation (the API server moves it
// on every change of spec, the only other part the Desired* functions read
// besides the name) and the resourceVersion of the spec.configMapRef
// ConfigMap whose data was hashed ("" for none, or missing).
type inputs struct {
	uid        types.UID
	generation int64
	refRV      string
}

func inputsOf(w *handrollv1.WebApp, ref *corev1.ConfigMap) inputs {
	in := inputs{uid: w.UID, generation: w.Generation}
	if ref != nil {
		in.refRV = ref.ResourceVersion
	}
	return in
}

// Child slots of a verifiedSet.
const (
	slotConfigMap = iota
	slotService
	slotDeployment
	slots
)

// version identifies what FirstDifference reads of a live child: its
// metadata (labels, annotations, owners) and the rest of what we set.
//
// A child with a generation (a Deployment) is identified by its uid, its
// generation and a digest of that metadata: the API server moves the
// generation on every change of spec and never on a change of status, so
// the status writes of a rollout, each a new resourceVersion, leave the
// version as it was. A child without one (a Service, a ConfigMap) is
// identified by its resourceVersion, which any write moves.
type version struct {
	uid        types.UID
	generation int64
	meta       uint64
	rv         string
}

func versionOf(obj metav1.Object) version {
	if obj.GetResourceVersion() == "" {
		return version{} // no API server wrote it: nothing to go by
	}
	if g := obj.GetGeneration(); g > 0 {
		return version{uid: obj.GetUID(), generation: g, meta: metaDigest(obj)}
	}
	return version{rv: obj.GetResourceVersion()}
}

// known tells whether v identifies a written object at all.
func (v version) known() bool { return v.rv != "" || v.generation > 0 }

// verified remembers, per WebApp, the version of each child that
// FirstDifference last found up to date, and the inputs it was compared
// against. A child at that same version, wanted from the same inputs, is
// still up to date: nothing it is made from has moved, and any change of
// what we set (a hand edit, a restore, a new object of the name) moves
// its version. So the steady state (a resync, the status events of a
// rollout) builds no desired object and walks none; whatever moved is
// compared in full as before.
//
// One entry per WebApp, a few hundred bytes, forgotten with the WebApp.
type verified struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*verifiedSet
}

type verifiedSet struct {
	in       inputs
	versions [slots]version // zero where not verified
}

// upToDate tells whether child slot of WebApp key, now live, was found up
// to date at its version for the same inputs.
func (v *verified) upToDate(key types.NamespacedName, in inputs, slot int, live metav1.Object) bool {
	at := versionOf(live)
	if !at.known() || in.generation == 0 {
		return false // an object no API server wrote: nothing to go by
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.m[key]
	return ok && s.in == in && s.versions[slot] == at
}

// record notes child slot of WebApp key as up to date, as live is, for
// in. Versions recorded for other inputs are dropped.
func (v *verified) record(key types.NamespacedName, in inputs, slot int, live metav1.Object) {
	at := versionOf(live)
	if !at.known() {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]*verifiedSet{}
	}
	s, ok := v.m[key]
	if !ok || s.in != in {
		s = &verifiedSet{in: in}
		v.m[key] = s
	}
	s.versions[slot] = at
}

// forget drops what was verified of WebApp key, once it is gone.
func (v *verified) forget(key types.NamespacedName) {
	v.mu.Lock()
	delete(v.m, key)
	v.mu.Unlock()
}

// len is how many WebApps have a child verified.
func (v *verified) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.m)
}

// metaDigest is a 64-bit FNV-1a digest of obj's labels, annotations and
// owner references: the metadata FirstDifference compares, whose changes
// move no generation.
func metaDigest(obj metav1.Object) uint64 {
	h := fnvOffset
	h = digestMap(h, obj.GetLabels())
	h = digestMap(h^'L', obj.GetAnnotations())
	for _, o := range obj.GetOwnerReferences() {
		h = digest(h^'O', o.APIVersion, o.Kind, o.Name, string(o.UID))
		h = digestBool(digestBool(h, o.Controller), o.BlockOwnerDeletion)
	}
	return h
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// digestMap adds m to h in no particular order: the sum of its entries'
// digests does not depend on the order a map is walked in, and needs no
// sorted copy of its keys.
func digestMap(h uint64, m map[string]string) uint64 {
	var sum uint64
	for k, v := range m {
		sum += digest(fnvOffset, k, v)
	}
	for i := range 8 {
		h = (h ^ (sum >> (8 * i) & 0xff)) * fnvPrime
	}
	return h
}

// digest adds each string, and a separator after it, to h.
func digest(h uint64, ss ...string) uint64 {
	for _, s := range ss {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * fnvPrime
		}
		h = (h ^ 0xff) * fnvPrime // no string holds 0xff: "a","b" ≠ "ab",""
	}
	return h
}

func digestBool(h uint64, b *bool) uint64 {
	switch {
	case b == nil:
		return (h ^ 0xfe) * fnvPrime
	case *b:
		return (h ^ 1) * fnvPrime
	}
	return (h ^ 2) * fnvPrime
}
