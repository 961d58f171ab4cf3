package webapp

import (
	"fmt"
	"reflect"
)

// FirstDifference returns the path of the first field desired sets that
// live does not hold, or "" when live already holds what applying desired
// would write, so the reconciler can skip the request (and logs the path to
// say why it applies). Two things must hold for "":
//
//   - live carries desired's applied-hash annotation: the configuration last
//     applied is this one (so a field removed from desired, which a subset
//     test cannot see, still forces an apply that removes it);
//   - every field desired sets has the same value in live: nobody edited a
//     field we own since (drift), which the hash alone cannot see.
//
// Fields that live has and desired does not (server defaults, status, other
// managers' fields) do not matter. Values compare as encoding/json writes
// them: quantities and the like in canonical form.
//
// Desired is compared with live the way the API server stores it: a field
// that live's Go type drops when it is empty (env[].value "" is stored as no
// value at all, through omitempty on a plain string) is up to date when
// live lacks it. Where live has the field, its value still counts, so an env
// var we set to "" and someone set to "x" is drift.
//
// It is the one comparison of desired and live, and the one rule for
// skipping a write (TestUpToDateMeansTheAppliedHashAndEveryDesiredValue):
// a "" is why a restart or an upgrade writes no child. Both sides must be
// typed (an apply configuration, a typed object): live is read in place by
// the walker, because encoding it whole on every reconcile was most of a
// no-op reconcile's time and garbage. The encoding/json comparison it
// replaced is kept in the tests as its reference (differenceJSON,
// TestFirstDifferenceMatchesJSON, FuzzFirstDifference).
func FirstDifference(desired any, live any) (string, error) {
	d, l := reflect.ValueOf(desired), reflect.ValueOf(live)
	if _, unstructured := live.(interface{ UnstructuredContent() map[string]any }); unstructured || !isStructPointer(d) || !isStructPointer(l) {
		return "", fmt.Errorf("comparing %T with %T: both must be pointers to typed structs", desired, live)
	}
	w := &walker{}
	differs, err := w.walk(d.Elem(), l.Elem())
	if !differs || err != nil {
		return "", err
	}
	return w.path(), nil
}

func isStructPointer(v reflect.Value) bool {
	return v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct
}
