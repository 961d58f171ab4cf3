package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile (-ldflags -X main.version=...): the
// VERSION file, the commit and whether the tree held uncommitted changes,
// as the kube-* binaries stamp gitVersion, gitCommit and gitTreeState. A
// build from any commit but the release's says so by its commit and state.
var (
	version      = "v0.0.0-dev"
	gitCommit    = ""
	gitTreeState = ""
)

// printVersion prints the version, the commit it was built from, and what
// the Go toolchain recorded about this binary: the toolchain, the platform
// and, when Go stamped them, the VCS settings.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "handroll %s\n", version)
	if gitCommit != "" {
		fmt.Fprintf(w, "  commit:   %s (tree %s)\n", gitCommit, treeState())
	}
	fmt.Fprintf(w, "  go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "  module:   %s %s\n", bi.Main.Path, bi.Main.Version)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "CGO_ENABLED", "-trimpath":
			fmt.Fprintf(w, "  %-9s %s\n", s.Key+":", s.Value)
		}
	}
}

func treeState() string {
	if gitTreeState == "" {
		return "state unknown"
	}
	return gitTreeState
}
