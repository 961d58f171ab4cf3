// Command sidebyside prints docs/side-by-side.md: handroll's start sequence
// and WebApp reconciler beside its controller-runtime twin's (hack/compare),
// step by step, with the line counts of docs/lines.md.
//
//	go run ./hack/sidebyside      # print the page
//	go run ./hack/sidebyside -w   # write docs/side-by-side.md
//
// Run it from the repository root. The steps (steps.go) name their code by
// declarations, step comments and calls, never by line numbers: the lines
// shown are found with go/parser each time, so the page follows the code,
// and an anchor that no longer names exactly one statement or declaration
// is an error that names the step and the file.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

func main() {
	write := flag.Bool("w", false, "write docs/side-by-side.md instead of printing it")
	flag.Parse()
	page, err := render(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
	if !*write {
		os.Stdout.Write(page)
		return
	}
	if err := os.WriteFile(filepath.Join("docs", "side-by-side.md"), page, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

// block is a range of one file shown on the page.
type block struct {
	src *source
	sp  span
}

type resolvedSide struct {
	blocks []block
	fields []block // of the options literal, adjacent ones merged
	note   string
	lines  int
}

type resolvedStep struct {
	step
	sides [2]resolvedSide // handroll, twin
}

type resolvedPair struct {
	pair
	steps []resolvedStep
	files [2][]string // the files each side shows, in order of appearance
	shown [2]int
}

// sideNames are the two columns, handroll first.
var sideNames = [2]string{"handroll", "controller-runtime"}

func render(root string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, errors.New("run it from the repository root")
	}
	linesPage, err := os.ReadFile(filepath.Join(root, "docs", "lines.md"))
	if err != nil {
		return nil, err
	}
	counts, err := parseLineCounts(string(linesPage))
	if err != nil {
		return nil, err
	}
	sources := map[string]*source{}
	load := func(path string) (*source, error) {
		if s, ok := sources[path]; ok {
			return s, nil
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			return nil, err
		}
		s, err := parseSource(path, src)
		if err != nil {
			return nil, err
		}
		sources[path] = s
		return s, nil
	}
	var resolved []resolvedPair
	for _, p := range pairs {
		rp, err := resolve(p, load, counts)
		if err != nil {
			return nil, err
		}
		resolved = append(resolved, rp)
	}
	return write(resolved, counts)
}

// resolve finds every step's lines and counts them. A line is counted once:
// in the step that names it as a field of the options literal if one does,
// else in the one step whose part shows it.
func resolve(p pair, load func(string) (*source, error), counts *lineCounts) (resolvedPair, error) {
	rp := resolvedPair{pair: p}
	opts, fieldSpans, err := optionFields(p, load)
	if err != nil {
		return rp, err
	}
	c := newLineCounter(opts, fieldSpans)
	for _, st := range p.steps {
		rs, err := c.resolveStep(&rp, st, load, fieldSpans)
		if err != nil {
			return rp, err
		}
		rp.steps = append(rp.steps, rs)
	}

	// Nothing shown can exceed the file: docs/lines.md counts by the same rule.
	for _, files := range rp.files {
		for _, f := range files {
			n, err := counts.file(f)
			if err != nil {
				return rp, err
			}
			if c.perFile[f] > n {
				return rp, fmt.Errorf("the steps show %d lines of %s, docs/lines.md counts %d in all: run `make lines`", c.perFile[f], f, n)
			}
		}
	}
	return rp, nil
}

// optionFields loads the file of p's options literal, if p has one, and
// returns the lines of each of its fields, once it has checked that each
// field is named by exactly one step.
func optionFields(p pair, load func(string) (*source, error)) (*source, map[string]span, error) {
	if p.options == nil {
		return nil, nil, nil
	}
	opts, err := load(p.options.file)
	if err != nil {
		return nil, nil, err
	}
	fieldSpans, keys, err := opts.fields(p.options.fn, p.options.typ)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.options.file, err)
	}
	claimed := map[string]string{}
	for _, st := range p.steps {
		for _, f := range st.twin.fields {
			if _, ok := fieldSpans[f]; !ok {
				return nil, nil, fmt.Errorf("step %q: %s: the %s literal in %s has no field %s (fix the step in hack/sidebyside/steps.go)", st.title, p.options.file, p.options.typ, p.options.fn, f)
			}
			if other, ok := claimed[f]; ok {
				return nil, nil, fmt.Errorf("steps %q and %q both name the field %s of %s", other, st.title, f, p.options.typ)
			}
			claimed[f] = st.title
		}
	}
	for _, k := range keys {
		if _, ok := claimed[k]; !ok {
			return nil, nil, fmt.Errorf("%s: no step names the field %s of the %s literal in %s: add it to a step in hack/sidebyside/steps.go", p.options.file, k, p.options.typ, p.options.fn)
		}
	}
	return opts, fieldSpans, nil
}

type fileLine struct {
	file string
	line int
}

// lineCounter counts each line of code once, in the step that shows it,
// and how many of each file's lines the steps show.
type lineCounter struct {
	opts      *source      // the options literal's file; nil for none
	isField   map[int]bool // lines of opts
	countedIn map[fileLine]string
	perFile   map[string]int
}

func newLineCounter(opts *source, fieldSpans map[string]span) *lineCounter {
	c := &lineCounter{opts: opts, isField: map[int]bool{}, countedIn: map[fileLine]string{}, perFile: map[string]int{}}
	for _, sp := range fieldSpans {
		for l := sp.from; l <= sp.to; l++ {
			c.isField[l] = true
		}
	}
	return c
}

// count counts the lines of code of s in sp for stepTitle: of the options
// file, only the field lines when fields is set, and only the others when
// not.
func (c *lineCounter) count(stepTitle string, s *source, sp span, fields bool) (int, error) {
	n := 0
	for l := sp.from; l <= sp.to; l++ {
		if !s.code[l] || s == c.opts && c.isField[l] != fields {
			continue
		}
		key := fileLine{s.path, l}
		if other, ok := c.countedIn[key]; ok {
			return 0, fmt.Errorf("steps %q and %q both show %s:%d: their anchors overlap (fix them in hack/sidebyside/steps.go)", other, stepTitle, s.path, l)
		}
		c.countedIn[key] = stepTitle
		c.perFile[s.path]++
		n++
	}
	return n, nil
}

// resolveStep finds and counts the lines of both sides of st, and adds
// their files and counts to rp.
func (c *lineCounter) resolveStep(rp *resolvedPair, st step, load func(string) (*source, error), fieldSpans map[string]span) (resolvedStep, error) {
	rs := resolvedStep{step: st}
	for i, sd := range [2]side{st.handroll, st.twin} {
		out := resolvedSide{note: sd.note}
		for _, pt := range sd.parts {
			s, err := load(pt.file)
			if err != nil {
				return rs, fmt.Errorf("step %q: %w", st.title, err)
			}
			sp, err := locate(st.title, pt, s)
			if err != nil {
				return rs, err
			}
			n, err := c.count(st.title, s, sp, false)
			if err != nil {
				return rs, err
			}
			out.lines += n
			out.blocks = append(out.blocks, block{s, sp})
			if !slices.Contains(rp.files[i], pt.file) {
				rp.files[i] = append(rp.files[i], pt.file)
			}
		}
		var spans []span
		for _, f := range sd.fields {
			spans = append(spans, fieldSpans[f])
		}
		for _, sp := range merge(spans) {
			n, err := c.count(st.title, c.opts, sp, true)
			if err != nil {
				return rs, err
			}
			out.lines += n
			out.fields = append(out.fields, block{c.opts, sp})
		}
		if len(out.blocks) == 0 && len(out.fields) == 0 && out.note == "" {
			return rs, fmt.Errorf("step %q: the %s side shows nothing and says nothing", st.title, sideNames[i])
		}
		rp.shown[i] += out.lines
		rs.sides[i] = out
	}
	return rs, nil
}

// merge sorts spans and joins those that touch.
func merge(spans []span) []span {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var out []span
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.from <= out[n-1].to+1 {
			out[n-1].to = max(out[n-1].to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

var header = `# Side by side: handroll and its controller-runtime twin

Generated from the code by ` + "`make side-by-side`" + ` (` + "`go run ./hack/sidebyside -w`" + `):
do not edit it by hand; test/docs fails while this page and the code
disagree.

The same operator twice: handroll on raw client-go, and its twin on
controller-runtime (` + "`hack/compare`" + `). Each step shows what each side writes
for one thing the operator does, handroll first, with the lines it takes. A
line counts when it holds Go code, as in [lines.md](lines.md): blank lines
and comments do not count, and each line is counted in one step only.

A block of code is shown where it is short enough to read beside its
twin's: at most ` + fmt.Sprint(inlineLimit) + ` lines, and at most ` + fmt.Sprint(sideBudget) + ` of one side in one step.
Anything longer is a link to its lines in the source, with its length, so
that the page reads in one sitting and the code stays one click away.

`

// inlineLimit is the longest block, in lines of the file, shown on the
// page, and sideBudget the most lines of one side shown in one step; what
// does not fit is linked.
const (
	inlineLimit = 16
	sideBudget  = 20
)

func write(pairs []resolvedPair, counts *lineCounts) ([]byte, error) {
	var b strings.Builder
	b.WriteString(header)
	slugs := slugger{}
	// The slugs are those of the headings below, in page order.
	pairSlugs := make([]string, len(pairs))
	stepSlugs := make([][]string, len(pairs))
	slugs.of("Summary")
	for i, p := range pairs {
		pairSlugs[i] = slugs.of(p.title)
		for _, st := range p.steps {
			stepSlugs[i] = append(stepSlugs[i], slugs.of(st.title))
		}
	}

	b.WriteString("## Summary\n\n")
	for i, p := range pairs {
		fmt.Fprintf(&b, "[%s](#%s)\n\n", p.title, pairSlugs[i])
		b.WriteString("| step | handroll | controller-runtime |\n|---|--:|--:|\n")
		for j, st := range p.steps {
			fmt.Fprintf(&b, "| [%s](#%s) | %d | %d |\n", st.title, stepSlugs[i][j], st.sides[0].lines, st.sides[1].lines)
		}
		fmt.Fprintf(&b, "| **shown in the steps** | **%d** | **%d** |\n", p.shown[0], p.shown[1])
		var whole [2]int
		var names [2][]string
		for k, files := range p.files {
			for _, f := range files {
				n, err := counts.file(f)
				if err != nil {
					return nil, err
				}
				whole[k] += n
				names[k] = append(names[k], "`"+f+"`")
			}
		}
		fmt.Fprintf(&b, "| these files whole, as [lines.md](lines.md) counts them: %s; the twin's %s | %d | %d |\n",
			strings.Join(names[0], ", "), strings.Join(names[1], ", "), whole[0], whole[1])
		name, pc, err := counts.piece(p.piece)
		if err != nil {
			return nil, err
		}
		short, _, _ := strings.Cut(name, ":")
		fmt.Fprintf(&b, "| the row *%s* of [lines.md](lines.md): %s | %d | %d |\n\n", short, p.pieceLabel, pc[0], pc[1])
	}

	for _, p := range pairs {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", p.title, p.intro)
		for _, st := range p.steps {
			fmt.Fprintf(&b, "### %s\n\n%s\n\n", st.title, st.does)
			for k, sd := range st.sides {
				fmt.Fprintf(&b, "**%s**: %d %s.", sideNames[k], sd.lines, plural(sd.lines, "line", "lines"))
				if sd.note != "" {
					fmt.Fprintf(&b, " %s", sd.note)
				}
				b.WriteString("\n\n")
				budget := sideBudget
				for _, bl := range sd.blocks {
					writeBlock(&b, "", bl, &budget)
				}
				for _, bl := range sd.fields {
					writeBlock(&b, "In the `"+p.options.typ+"` literal: ", bl, &budget)
				}
			}
		}
	}
	out := strings.TrimRight(b.String(), "\n") + "\n"
	return []byte(out), nil
}

// writeBlock writes a link to bl's lines and, when there are at most
// inlineLimit of them and budget (what is left of the side's sideBudget in
// the step) holds them, the lines as a Go code block.
func writeBlock(b *strings.Builder, prefix string, bl block, budget *int) {
	lines, anchor := fmt.Sprint(bl.sp.from), fmt.Sprintf("L%d", bl.sp.from)
	if bl.sp.to > bl.sp.from {
		lines += fmt.Sprintf("-%d", bl.sp.to)
		anchor += fmt.Sprintf("-L%d", bl.sp.to)
	}
	link := fmt.Sprintf("%s[`%s:%s`](../%s#%s)", prefix, bl.src.path, lines, bl.src.path, anchor)
	n := bl.sp.to - bl.sp.from + 1
	if n > inlineLimit || n > *budget {
		fmt.Fprintf(b, "%s: %d lines of code, not shown.\n\n", link, bl.src.count(bl.sp))
		return
	}
	*budget -= n
	code := bl.src.snippet(bl.sp)
	fence := "```"
	for strings.Contains(code, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "%s\n\n%sgo\n%s\n%s\n\n", link, fence, code, fence)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// slugger gives headings the anchors GitHub gives them: lower case, spaces
// to hyphens, other punctuation dropped, "-1", "-2"... on repeats.
type slugger map[string]int

func (s slugger) of(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	slug := b.String()
	n := s[slug]
	s[slug]++
	if n > 0 {
		slug = fmt.Sprintf("%s-%d", slug, n)
	}
	return slug
}
