package main

import (
	"strings"
	"testing"
)

const testSource = `package p

// T is a type.
type T struct{}

// M is a method.
func (t *T) M() {}

func run() error {
	// Step 1 — one.
	a := 1

	// About b.
	b := call(a)
	if b > 0 {
		return nil
	}

	// Step 2 — two.
	opts := Options{
		A: a,
		B: b,
	}
	return use(opts)
}
`

func parseTest(t *testing.T) *source {
	t.Helper()
	s, err := parseSource("x/p.go", []byte(testSource))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAnchorFound(t *testing.T) {
	s := parseTest(t)
	for _, tc := range []struct {
		p    part
		want span
	}{
		{whole("x/p.go", "T"), span{3, 4}},
		{whole("x/p.go", "T.M"), span{6, 7}},
		{stmts("x/p.go", "run", "// Step 1 —", "// Step 2 —"), span{10, 17}},
		// A code anchor brings the comments directly above its statement.
		{stmts("x/p.go", "run", "call(a)", "// Step 2 —"), span{13, 17}},
		{stmts("x/p.go", "run", "// Step 2 —", ""), span{19, 24}},
		{stmts("x/p.go", "run", "", "b := call"), span{10, 11}},
	} {
		got, err := locate("a step", tc.p, s)
		if err != nil {
			t.Errorf("%+v: %v", tc.p, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%+v: lines %v, want %v", tc.p, got, tc.want)
		}
	}
	if n := s.count(span{10, 17}); n != 5 {
		t.Errorf("step 1 holds %d code lines, want 5", n)
	}
}

// TestAnchorMissing: an anchor that names nothing, or more than one
// statement, is an error that names the step, the file and the anchor, so
// that the page cannot silently show the wrong lines.
func TestAnchorMissing(t *testing.T) {
	s := parseTest(t)
	for _, tc := range []struct {
		p    part
		want string
	}{
		{whole("x/p.go", "Gone"), "no declaration Gone"},
		{whole("x/p.go", "U.M"), "no declaration U.M"},
		{stmts("x/p.go", "run", "// Step 3 —", ""), `"// Step 3 —"`},
		{stmts("x/p.go", "run", "", "mgr.Start("), `"mgr.Start("`},
		{stmts("x/p.go", "run", "return", ""), `2 statements of run hold "return"`},
		{stmts("x/p.go", "run", "// Step 2 —", "// Step 1 —"), "does not come before"},
		{stmts("x/p.go", "T", "", ""), "not a function"},
	} {
		_, err := locate("Step X", tc.p, s)
		if err == nil {
			t.Errorf("%+v: no error", tc.p)
			continue
		}
		for _, w := range []string{`step "Step X"`, "x/p.go", tc.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", tc.p, err, w)
			}
		}
	}
}

func TestAnchorFields(t *testing.T) {
	s := parseTest(t)
	spans, keys, err := s.fields("run", "Options")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "A,B" || spans["A"] != (span{21, 21}) || spans["B"] != (span{22, 22}) {
		t.Errorf("fields %v at %v", keys, spans)
	}
	if _, _, err := s.fields("run", "ctrl.Options"); err == nil {
		t.Error("no error for a literal that is not there")
	}
	if got := merge([]span{spans["B"], spans["A"]}); len(got) != 1 || got[0] != (span{21, 22}) {
		t.Errorf("merged %v, want one span 21-22", got)
	}
}

// TestAnchorOptionsUnclaimed: a field of the options literal that no step
// names fails the page, so that a new Manager option gets a step.
func TestAnchorOptionsUnclaimed(t *testing.T) {
	s := parseTest(t)
	p := pair{
		options: &optionsLiteral{file: "x/p.go", fn: "run", typ: "Options"},
		steps: []step{{
			title:    "one",
			handroll: side{note: "none"},
			twin:     side{parts: []part{stmts("x/p.go", "run", "", "")}, fields: []string{"A"}},
		}},
	}
	load := func(string) (*source, error) { return s, nil }
	_, err := resolve(p, load, &lineCounts{})
	if err == nil || !strings.Contains(err.Error(), "no step names the field B") {
		t.Fatalf("got %v, want an error about field B", err)
	}
}
