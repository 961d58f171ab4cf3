package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestTerminalError(t *testing.T) {
	base := errors.New("invalid spec")
	te := TerminalError(base)

	if !IsTerminal(te) {
		t.Error("IsTerminal(TerminalError(err)) = false")
	}
	if !IsTerminal(fmt.Errorf("reconciling: %w", te)) {
		t.Error("a wrapped terminal error is not terminal")
	}
	if !IsTerminal(errors.Join(errors.New("other"), te)) {
		t.Error("a joined terminal error is not terminal")
	}
	if IsTerminal(base) || IsTerminal(nil) || IsTerminal(fmt.Errorf("x: %w", base)) {
		t.Error("a plain error is terminal")
	}
	if !errors.Is(te, base) {
		t.Error("errors.Is(TerminalError(err), err) = false")
	}
	var pathErr *fs.PathError
	if !errors.As(TerminalError(&fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}), &pathErr) || pathErr.Path != "/x" {
		t.Error("errors.As does not reach the wrapped error")
	}
	if !errors.Is(TerminalError(&fs.PathError{Err: fs.ErrNotExist}), fs.ErrNotExist) {
		t.Error("errors.Is does not reach through the wrapped chain")
	}
	if got := te.Error(); got != "terminal error: invalid spec" {
		t.Errorf("Error() = %q", got)
	}
	if got := TerminalError(nil); !IsTerminal(got) || got.Error() != "terminal error" {
		t.Errorf("TerminalError(nil) = %q, terminal %v", got, IsTerminal(got))
	}
}
