// Command release finishes `make release`: beside the files the Makefile
// has put in the release directory (install.yaml, the chart, the image
// archive), it writes sbom.spdx.json, an SPDX 2.3 SBOM of the operator's Go
// modules as the binaries' build information records them, and SHA256SUMS
// over every file, in sha256sum's format, sorted by name.
//
//	go -C hack/image run ./cmd/release --dir dist --version v0.1.0 \
//	  --digest sha256:... --binary bin/handroll-linux-amd64 --binary bin/handroll-linux-arm64
//
// Both are deterministic: the SBOM's creation time is SOURCE_DATE_EPOCH
// (else the Unix epoch), its namespace is derived from the version and the
// image digest, and its packages are sorted; so the same commit gives the
// same files.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

var (
	semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	dir := fs.String("dir", "dist", "the release directory: the SBOM and SHA256SUMS are written there")
	version := fs.String("version", "", "the release's version, such as v0.1.0")
	imageDigest := fs.String("digest", "", "the image index's digest (sha256:...)")
	var binaries []string
	fs.Func("binary", "a released binary whose Go modules the SBOM lists; repeat for each platform", func(s string) error {
		binaries = append(binaries, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	case !semver.MatchString(*version):
		return fmt.Errorf("--version %q: want a semantic version such as v0.1.0", *version)
	case !digest.MatchString(*imageDigest):
		return fmt.Errorf("--digest %q: want sha256: and 64 hex digits", *imageDigest)
	case len(binaries) == 0:
		return fmt.Errorf("no --binary given")
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}

	doc, err := SBOM(binaries, *version, *imageDigest, created)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*dir, SBOMFile), doc); err != nil {
		return err
	}
	sums, err := Sums(*dir)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*dir, SumsFile), sums); err != nil {
		return err
	}
	fmt.Printf("release: %s and %s in %s\n", SBOMFile, SumsFile, *dir)
	return nil
}

func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// writeFile replaces path whole.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
