// Command release finishes `make release`: beside the files the Makefile
// has put in the release directory (install.yaml, the chart, the image
// archive), it writes
//
//   - sbom.spdx.json, an SPDX 2.3 SBOM that syft makes of the released
//     binaries: every Go module they link, each with the licence found in
//     its directory of the local module cache;
//   - provenance.slsa.json, a SLSA v1 provenance predicate: the commit, the
//     Go toolchain and the modules (by their go.sum hashes) the binaries
//     were built from, for cosign attest --type slsaprovenance1;
//   - SHA256SUMS over every file, in sha256sum's format, sorted by name.
//
// The Makefile runs it as
//
//	go -C hack/release run . --dir dist --version v0.1.0 --commit <sha> \
//	  --digest sha256:... --license LICENSE \
//	  --binary bin/handroll-linux-amd64 --binary bin/handroll-linux-arm64
//
// All are deterministic: every time in them is SOURCE_DATE_EPOCH (else the
// Unix epoch), the SBOM's namespace is derived from the version and the
// image digest, and lists are sorted; so the same commit gives the same
// files. docs/sbom.md says what they hold.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

var (
	semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	commit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

type options struct {
	dir, version, imageDigest, commit, license string
	binaries                                   []string
}

func parse(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "dist", "the release directory: the SBOM, the provenance and SHA256SUMS are written there")
	fs.StringVar(&o.version, "version", "", "the release's version, such as v0.1.0")
	fs.StringVar(&o.imageDigest, "digest", "", "the image index's digest (sha256:...)")
	fs.StringVar(&o.commit, "commit", "", "the commit the release is built from (git rev-parse HEAD)")
	fs.StringVar(&o.license, "license", "", "the repository's LICENSE file: the main module's licence in the SBOM")
	fs.Func("binary", "a released binary, cataloged for the SBOM; repeat for each platform", func(s string) error {
		o.binaries = append(o.binaries, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case !semver.MatchString(o.version):
		return nil, fmt.Errorf("--version %q: want a semantic version such as v0.1.0", o.version)
	case !digest.MatchString(o.imageDigest):
		return nil, fmt.Errorf("--digest %q: want sha256: and 64 hex digits", o.imageDigest)
	case !commit.MatchString(o.commit):
		return nil, fmt.Errorf("--commit %q: want a full git commit hash", o.commit)
	case o.license == "":
		return nil, fmt.Errorf("no --license given")
	case len(o.binaries) == 0:
		return nil, fmt.Errorf("no --binary given")
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	epoch, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	bins, err := ReadBinaries(o.binaries)
	if err != nil {
		return err
	}
	env, err := goEnv(ctx, "GOMODCACHE", "GOFLAGS", "GOROOT", "GOVERSION")
	if err != nil {
		return err
	}
	switch {
	case env["GOMODCACHE"] == "":
		return fmt.Errorf("go env GOMODCACHE is empty: no module cache to read licences from")
	case env["GOVERSION"] != bins.GoVersion:
		// The standard library's licence is read from this go's GOROOT,
		// and GOFLAGS is this go's: both must be the build's.
		return fmt.Errorf("the binaries were built by %s, and this is %s: release with the Go that built them", bins.GoVersion, env["GOVERSION"])
	}

	sbom, err := SBOM(ctx, SBOMInput{
		Binaries: o.binaries, MainModule: bins.MainModule, Version: o.version, ImageDigest: o.imageDigest,
		License: o.license, GoLicense: filepath.Join(env["GOROOT"], "LICENSE"), ModCache: env["GOMODCACHE"], Created: epoch,
	})
	if err != nil {
		return err
	}
	prov, err := Provenance(ProvenanceInput{
		Binaries: bins, Version: o.version, Commit: o.commit, GoFlags: env["GOFLAGS"], Epoch: epoch, SBOM: sbom,
	})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{SBOMFile: sbom, ProvenanceFile: prov} {
		if err := writeFile(filepath.Join(o.dir, name), data); err != nil {
			return err
		}
	}
	sums, err := Sums(o.dir)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.dir, SumsFile), sums); err != nil {
		return err
	}
	fmt.Printf("release: %s, %s and %s in %s\n", SBOMFile, ProvenanceFile, SumsFile, o.dir)
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
