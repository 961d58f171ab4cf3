package history

import "fmt"

// CutError says that a released version names a tree other than the one
// it was cut from.
type CutError struct {
	Release Release
	Date    string // the release commit's date, yyyy-mm-dd
	Head    string // HEAD's abbreviated commit
	commit  string // the release's abbreviated commit
}

func (e *CutError) Error() string {
	return fmt.Sprintf("release: %s was cut at %s (%s); HEAD is %s, a different tree: a version names one artifact — "+
		"check out %s to rebuild it, or set VERSION to the next version (such as %s)",
		e.Release.Version, e.commit, e.Date, e.Head, e.Release.Version, NextDevelopment(e.Release.Version))
}

// Check refuses to build version from HEAD of the repository at dir when
// version was released from another tree: one version, one artifact. A
// version never released (a pre-release such as v0.3.0-dev, or one not cut
// yet) passes without reading history; so does HEAD at the release's tree,
// which rebuilds it. The refusal is a *CutError.
func Check(dir, version string) error {
	if !IsRelease(version) {
		return nil
	}
	r, cut, err := Lookup(dir, "HEAD", version)
	if err != nil || !cut {
		return err
	}
	head, err := git(dir, "rev-parse", "HEAD^{tree}")
	if err != nil {
		return err
	}
	tree, err := git(dir, "rev-parse", r.Commit+"^{tree}")
	if err != nil {
		return err
	}
	if head == tree {
		return nil
	}
	e := &CutError{Release: r}
	if e.Date, err = git(dir, "show", "-s", "--format=%cs", r.Commit); err != nil {
		return err
	}
	if e.commit, err = git(dir, "rev-parse", "--short", r.Commit); err != nil {
		return err
	}
	if e.Head, err = git(dir, "rev-parse", "--short", "HEAD"); err != nil {
		return err
	}
	return e
}
