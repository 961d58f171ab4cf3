package controller

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Predicate filters informer events before a Handler sees them; an event
// passes when the method for its type returns true. Filtering here saves a
// reconcile, but a dropped event is never seen again: a predicate must only
// drop events that the Reconciler would not care about.
type Predicate interface {
	Create(obj metav1.Object) bool
	Update(oldObj, newObj metav1.Object) bool
	Delete(obj metav1.Object) bool
}

// PredicateFuncs builds a Predicate from functions; a nil function lets its
// events through.
type PredicateFuncs struct {
	CreateFunc func(obj metav1.Object) bool
	UpdateFunc func(oldObj, newObj metav1.Object) bool
	DeleteFunc func(obj metav1.Object) bool
}

func (p PredicateFuncs) Create(obj metav1.Object) bool {
	return p.CreateFunc == nil || p.CreateFunc(obj)
}

func (p PredicateFuncs) Update(oldObj, newObj metav1.Object) bool {
	return p.UpdateFunc == nil || p.UpdateFunc(oldObj, newObj)
}

func (p PredicateFuncs) Delete(obj metav1.Object) bool {
	return p.DeleteFunc == nil || p.DeleteFunc(obj)
}

// GenerationChanged lets an update through only when metadata.generation
// changed, that is when the spec changed: status writes (including our own)
// and resyncs are dropped. Create and delete pass. Kinds without a
// generation (ConfigMaps, for one) always have 0, so all their updates are
// dropped.
func GenerationChanged() Predicate {
	return PredicateFuncs{UpdateFunc: func(oldObj, newObj metav1.Object) bool {
		return oldObj.GetGeneration() != newObj.GetGeneration()
	}}
}

// ResourceVersionChanged drops the updates that an informer resync produces,
// where old and new are the same stored version. Create and delete pass.
func ResourceVersionChanged() Predicate {
	return PredicateFuncs{UpdateFunc: func(oldObj, newObj metav1.Object) bool {
		return oldObj.GetResourceVersion() != newObj.GetResourceVersion()
	}}
}

// LabelSelector lets through events for objects whose labels match sel; for
// an update, the new object's labels (as controller-runtime's
// LabelSelectorPredicate), so an object relabelled out of the selection is
// not seen again.
func LabelSelector(sel labels.Selector) Predicate {
	matches := func(obj metav1.Object) bool { return sel.Matches(labels.Set(obj.GetLabels())) }
	return PredicateFuncs{
		CreateFunc: matches,
		UpdateFunc: func(_, newObj metav1.Object) bool { return matches(newObj) },
		DeleteFunc: matches,
	}
}

// And passes an event when every predicate does (and when there are none).
func And(preds ...Predicate) Predicate { return and(slices.Clone(preds)) }

type and []Predicate

func (a and) Create(obj metav1.Object) bool {
	for _, p := range a {
		if !p.Create(obj) {
			return false
		}
	}
	return true
}

func (a and) Update(oldObj, newObj metav1.Object) bool {
	for _, p := range a {
		if !p.Update(oldObj, newObj) {
			return false
		}
	}
	return true
}

func (a and) Delete(obj metav1.Object) bool {
	for _, p := range a {
		if !p.Delete(obj) {
			return false
		}
	}
	return true
}

// Or passes an event when at least one predicate does (never when there are
// none).
func Or(preds ...Predicate) Predicate { return or(slices.Clone(preds)) }

type or []Predicate

func (o or) Create(obj metav1.Object) bool {
	for _, p := range o {
		if p.Create(obj) {
			return true
		}
	}
	return false
}

func (o or) Update(oldObj, newObj metav1.Object) bool {
	for _, p := range o {
		if p.Update(oldObj, newObj) {
			return true
		}
	}
	return false
}

func (o or) Delete(obj metav1.Object) bool {
	for _, p := range o {
		if p.Delete(obj) {
			return true
		}
	}
	return false
}

// Not inverts p.
func Not(p Predicate) Predicate { return not{p} }

type not struct{ p Predicate }

func (n not) Create(obj metav1.Object) bool            { return !n.p.Create(obj) }
func (n not) Update(oldObj, newObj metav1.Object) bool { return !n.p.Update(oldObj, newObj) }
func (n not) Delete(obj metav1.Object) bool            { return !n.p.Delete(obj) }
