package cache

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// internCap bounds the intern table: the strings that repeat across every
// child (label and annotation keys, the managed-by value, the owner's
// apiVersion and kind, namespaces) are a few dozen; the table stops taking
// new ones well before it could grow with the cluster.
const internCap = 4096

// interned holds one copy of each string that repeats across the cached
// children. Each decoded object brings its own copy of every string; the
// trims keep the table's instead, some 200 bytes less per object.
var interned = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// intern returns the table's copy of s, adding s while there is room.
func intern(s string) string {
	interned.RLock()
	c, ok := interned.m[s]
	interned.RUnlock()
	if ok {
		return c
	}
	interned.Lock()
	defer interned.Unlock()
	if c, ok := interned.m[s]; ok {
		return c
	}
	if len(interned.m) >= internCap {
		return s
	}
	interned.m[s] = s
	return s
}

// instanceLabel's value is the WebApp's name: one per WebApp, so not
// interned.
const instanceLabel = "app.kubernetes.io/instance"

// internLabels replaces m's keys and values with their interned copies, but
// for instanceLabel's value. A map assignment to an existing string key
// stores the key given, so m keeps its entries and allocates nothing.
func internLabels(m map[string]string) {
	for k, v := range m {
		if k != instanceLabel {
			v = intern(v)
		}
		m[intern(k)] = v
	}
}

// internKeys replaces m's keys with their interned copies: annotation
// values (hashes, revisions) are an object's own.
func internKeys(m map[string]string) {
	for k, v := range m {
		m[intern(k)] = v
	}
}

// internOwners interns the apiVersion and kind of each owner reference.
func internOwners(refs []metav1.OwnerReference) {
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
}
