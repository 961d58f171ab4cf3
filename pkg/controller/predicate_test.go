package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func object(generation int64, resourceVersion string, lbls map[string]string) metav1.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "x", Generation: generation, ResourceVersion: resourceVersion, Labels: lbls,
	}}
}

// verdicts is what a predicate says for a create of c, an update from o to
// n, and a delete of c.
type verdicts struct{ create, update, delete bool }

func judge(p Predicate, c, o, n metav1.Object) verdicts {
	return verdicts{p.Create(c), p.Update(o, n), p.Delete(c)}
}

func TestGenerationChanged(t *testing.T) {
	p := GenerationChanged()
	if got := judge(p, object(1, "1", nil), object(1, "1", nil), object(2, "2", nil)); got != (verdicts{true, true, true}) {
		t.Errorf("spec change: %+v, want all true", got)
	}
	// A status write bumps resourceVersion, not generation.
	if got := p.Update(object(1, "1", nil), object(1, "2", nil)); got {
		t.Error("update with the same generation passed")
	}
}

func TestResourceVersionChanged(t *testing.T) {
	p := ResourceVersionChanged()
	if !p.Update(object(1, "1", nil), object(1, "2", nil)) {
		t.Error("update to a new resourceVersion dropped")
	}
	// What a resync delivers: the same version twice.
	if p.Update(object(1, "7", nil), object(1, "7", nil)) {
		t.Error("resync (same resourceVersion) passed")
	}
	if !p.Create(object(1, "1", nil)) || !p.Delete(object(1, "1", nil)) {
		t.Error("create or delete dropped")
	}
}

func TestLabelSelector(t *testing.T) {
	p := LabelSelector(labels.SelectorFromSet(labels.Set{"app": "web"}))
	web, other := map[string]string{"app": "web", "tier": "x"}, map[string]string{"app": "db"}
	if got := judge(p, object(1, "1", web), object(1, "1", other), object(1, "2", web)); got != (verdicts{true, true, true}) {
		t.Errorf("matching object: %+v, want all true", got)
	}
	if got := judge(p, object(1, "1", other), object(1, "1", web), object(1, "2", other)); got != (verdicts{false, false, false}) {
		t.Errorf("non-matching object: %+v, want all false (update judged on the new object)", got)
	}
	if p.Create(object(1, "1", nil)) {
		t.Error("object without labels passed")
	}
}

func TestPredicateFuncsDefaultToTrue(t *testing.T) {
	x := object(1, "1", nil)
	if got := judge(PredicateFuncs{}, x, x, x); got != (verdicts{true, true, true}) {
		t.Errorf("empty PredicateFuncs: %+v, want all true", got)
	}
	onlyDeletes := PredicateFuncs{
		CreateFunc: func(metav1.Object) bool { return false },
		UpdateFunc: func(_, _ metav1.Object) bool { return false },
	}
	if got := judge(onlyDeletes, x, x, x); got != (verdicts{false, false, true}) {
		t.Errorf("create and update turned off: %+v", got)
	}
}

func TestAndOrNot(t *testing.T) {
	x := object(1, "1", nil)
	yes, no := PredicateFuncs{}, Not(PredicateFuncs{})
	all := func(b bool) verdicts { return verdicts{b, b, b} }
	tests := []struct {
		name string
		p    Predicate
		want bool
	}{
		{"Not(true)", no, false},
		{"Not(Not(true))", Not(no), true},
		{"And()", And(), true},
		{"And(true, true)", And(yes, yes), true},
		{"And(true, false)", And(yes, no), false},
		{"And(false, true)", And(no, yes), false},
		{"Or()", Or(), false},
		{"Or(false, false)", Or(no, no), false},
		{"Or(false, true)", Or(no, yes), true},
		{"Or(true, false)", Or(yes, no), true},
		{"Not(Or(false, And(true, true)))", Not(Or(no, And(yes, yes))), false},
	}
	for _, tt := range tests {
		if got := judge(tt.p, x, x, x); got != all(tt.want) {
			t.Errorf("%s: %+v, want all %v", tt.name, got, tt.want)
		}
	}

	// Each event type is combined on its own.
	createOnly := PredicateFuncs{UpdateFunc: func(_, _ metav1.Object) bool { return false }, DeleteFunc: func(metav1.Object) bool { return false }}
	deleteOnly := PredicateFuncs{CreateFunc: func(metav1.Object) bool { return false }, UpdateFunc: func(_, _ metav1.Object) bool { return false }}
	if got := judge(Or(createOnly, deleteOnly), x, x, x); got != (verdicts{true, false, true}) {
		t.Errorf("Or per event type: %+v", got)
	}
	if got := judge(And(createOnly, Not(deleteOnly)), x, x, x); got != (verdicts{true, false, false}) {
		t.Errorf("And per event type: %+v", got)
	}

	// And and Or keep their own copy of the list.
	preds := []Predicate{yes}
	a := And(preds...)
	preds[0] = no
	if !a.Create(x) {
		t.Error("And changed when the caller's slice changed")
	}
}
