package webapp

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
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

// verified remembers, per WebApp, the resourceVersion of each child that
// FirstDifference last found up to date, and the inputs it was compared
// against. A child at that same version, wanted from the same inputs, is
// still up to date: nothing it is made from has moved, and any write to it
// (a hand edit, a restore) moves its version. So the steady state (a
// resync, the status event of a rollout) builds no desired object and
// walks none; whatever moved is compared in full as before.
//
// One entry per WebApp, whose versions are the cached objects' own strings:
// a few hundred bytes, forgotten with the WebApp.
type verified struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*verifiedSet
}

type verifiedSet struct {
	in  inputs
	rvs [slots]string // "" where not verified
}

// upToDate tells whether child slot of WebApp key, now at version rv, was
// found up to date at rv for the same inputs.
func (v *verified) upToDate(key types.NamespacedName, in inputs, slot int, rv string) bool {
	if rv == "" || in.generation == 0 {
		return false // an object no API server wrote: nothing to go by
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.m[key]
	return ok && s.in == in && s.rvs[slot] == rv
}

// record notes child slot of WebApp key as up to date at version rv for
// in. Versions recorded for other inputs are dropped.
func (v *verified) record(key types.NamespacedName, in inputs, slot int, rv string) {
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
	s.rvs[slot] = rv
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
