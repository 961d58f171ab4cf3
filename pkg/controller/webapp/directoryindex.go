package webapp

import (
	corev1 "k8s.io/api/core/v1"
)

// directoryIndex is what DirectoryReconciler knows of the directory between
// reconciles, so that one of them need compute only the keys events named.
// Its rule: while valid, every key that the reconciler manages and that is
// not dirty has, in the parts as the index holds them, exactly the entry a
// full rebuild would leave: the desired one in the part P puts it in, none
// elsewhere. A reconcile keeps the rule by computing every dirty key, and
// by making dirty again each key it did not write; a part that changed
// under the index (anyone's write, or ours whose result it cannot tell)
// makes dirty the keys whose entries differ. Whatever the index cannot
// account for (P or part 0 changed, a failed write) invalidates it, and
// the next reconcile rebuilds it whole.
type directoryIndex struct {
	valid bool
	parts int // P, as part 0 says it
	part  []indexedPart
}

// indexedPart is one part of the directory as the index holds it.
type indexedPart struct {
	// cm is the part at the version the next write is to name (nil:
	// absent): the cache's object, or while the cache has not seen our
	// last write, the one that write returned. Never modified.
	cm *corev1.ConfigMap
	// home is the size of cm's entries that P puts in this part: the
	// directory's size, for P, is the sum over the parts (PlanDirectory).
	home int
	// behind, while wrote, is the version our last write replaced: a
	// cache that still shows it has not seen the write yet.
	behind partVersion
	wrote  bool
}

// partVersion tells two states of a part apart.
type partVersion struct {
	exists          bool
	resourceVersion string
}

func partVersionOf(cm *corev1.ConfigMap) partVersion {
	if cm == nil {
		return partVersion{}
	}
	return partVersion{true, cm.ResourceVersion}
}

func (x *directoryIndex) invalidate() { *x = directoryIndex{} }

// catchUp brings x to the parts that cached holds, where they are not the
// versions x knows: the keys whose entries differ join dirty. It tells
// whether x stands for the directory: false when it was never built, or
// when part 0 is gone or says another P.
func (x *directoryIndex) catchUp(cached map[int]*corev1.ConfigMap, dirty map[string]struct{}) bool {
	if !x.valid {
		return false
	}
	for i := range x.part {
		p, cm := &x.part[i], cached[i]
		switch v := partVersionOf(cm); {
		case v == partVersionOf(p.cm):
			p.cm, p.wrote = cm, false // the cache's copy, not the write's
		case p.wrote && v == p.behind:
			// The cache has not seen our write yet: keep what it returned.
		default:
			changedKeys(p.cm, cm, dirty)
			*p = indexedPart{cm: cm, home: homeSize(cm, i, x.parts)}
		}
	}
	part0 := x.part[0].cm
	if part0 == nil {
		return false
	}
	parts, err := DirectoryParts(part0.Annotations)
	return err == nil && parts == x.parts
}

// rebuilt builds x from the outcome of a full step, if keep and the step
// left what the rule asks: every write through or refused (their keys made
// dirty again by the caller), and P as it was.
func (x *directoryIndex) rebuilt(s *directoryStep, keep bool) {
	if !keep || len(s.errs) > 0 || s.parts == 0 || s.plan.Parts != s.parts {
		x.invalidate()
		return
	}
	*x = directoryIndex{valid: true, parts: s.parts, part: make([]indexedPart, s.parts)}
	for i := range x.part {
		p := indexedPart{cm: s.base[i]}
		if cm, ok := s.written[i]; ok {
			p = indexedPart{cm: cm, behind: partVersionOf(s.base[i]), wrote: true}
		}
		p.home = homeSize(p.cm, i, x.parts)
		x.part[i] = p
	}
}

// advance brings x past an incremental step's writes.
func (x *directoryIndex) advance(s *directoryStep) {
	if len(s.errs) > 0 {
		x.invalidate()
		return
	}
	for i, cm := range s.written {
		p := &x.part[i]
		if p.cm == nil {
			p.home = homeSize(cm, i, x.parts) // created, or merged into one the cache lacked
		} else {
			// A preconditioned patch: the part is exactly p.cm and the changes.
			p.home += homeDelta(p.cm.Data, s.plan.Changes[i], i, x.parts)
		}
		p.cm, p.behind, p.wrote = cm, partVersionOf(p.cm), true
	}
}

// bases are the parts as the next write is to find them.
func (x *directoryIndex) bases() map[int]*corev1.ConfigMap {
	base := make(map[int]*corev1.ConfigMap, len(x.part))
	for i, p := range x.part {
		if p.cm != nil {
			base[i] = p.cm
		}
	}
	return base
}

// data is part i's entries (nil when absent).
func (x *directoryIndex) data(i int) map[string]string {
	if cm := x.part[i].cm; cm != nil {
		return cm.Data
	}
	return nil
}

// size is the directory's size as PlanDirectory counts it.
func (x *directoryIndex) size() int {
	n := 0
	for _, p := range x.part {
		n += p.home
	}
	return n
}

// homeSize is the size of the entries of cm (part i) that parts puts there.
func homeSize(cm *corev1.ConfigMap, i, parts int) int {
	if cm == nil {
		return 0
	}
	n := 0
	for k, v := range cm.Data {
		if DirectoryPart(k, parts) == i {
			n += len(k) + len(v)
		}
	}
	return n
}

// homeDelta is how changes to part i, whose entries were data, change its
// homeSize.
func homeDelta(data map[string]string, changes map[string]*string, i, parts int) int {
	d := 0
	for k, v := range changes {
		if DirectoryPart(k, parts) != i {
			continue
		}
		if old, ok := data[k]; ok {
			d -= len(k) + len(old)
		}
		if v != nil {
			d += len(k) + len(*v)
		}
	}
	return d
}

// changedKeys adds to dirty every key whose entry differs between two
// versions of a part (nil: absent).
func changedKeys(from, to *corev1.ConfigMap, dirty map[string]struct{}) {
	var a, b map[string]string
	if from != nil {
		a = from.Data
	}
	if to != nil {
		b = to.Data
	}
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			dirty[k] = struct{}{}
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			dirty[k] = struct{}{}
		}
	}
}
