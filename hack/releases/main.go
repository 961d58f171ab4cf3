// Command releases names handroll's releases as found in its git history
// (hack/releases/history holds the rule), for the Makefile and for people:
//
//	go run ./hack/releases list            # every release, oldest first: "vX.Y.Z <commit>"
//	go run ./hack/releases latest [REV]    # the newest release strictly before REV (default HEAD)
//	go run ./hack/releases check VERSION   # refuse a released VERSION on a tree other than its release's
//
// Run it from the repository root. It exits 1 with a line on stderr when
// there is no release to print, when check refuses, or when the clone has
// no history to read (a shallow one); 2 on a usage error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/handroll/handroll/hack/releases/history"
)

const usage = `usage: releases list | latest [REV] | check VERSION`

func main() {
	os.Exit(run(".", os.Args[1:], os.Stdout, os.Stderr))
}

// run carries out args in the repository at dir and returns the exit code.
func run(dir string, args []string, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) == 1 && args[0] == "list":
		var all []history.Release
		if all, err = history.Find(dir, "HEAD"); err == nil {
			for _, r := range all {
				fmt.Fprintln(stdout, r)
			}
		}
	case len(args) >= 1 && len(args) <= 2 && args[0] == "latest":
		rev := "HEAD"
		if len(args) == 2 {
			rev = args[1]
		}
		var r history.Release
		if r, err = history.Latest(dir, rev); err == nil {
			fmt.Fprintln(stdout, r)
		}
	case len(args) == 2 && args[0] == "check":
		err = history.Check(dir, args[1])
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err == nil {
		return 0
	}
	var cut *history.CutError
	if errors.As(err, &cut) {
		fmt.Fprintln(stderr, err) // already says "release: ..."
	} else {
		fmt.Fprintf(stderr, "releases: %v\n", err)
	}
	return 1
}
