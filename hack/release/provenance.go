package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	// ProvenanceFile is the SLSA provenance predicate's name in the
	// release directory, for cosign attest --type slsaprovenance1.
	ProvenanceFile = "provenance.slsa.json"

	// BuildType names how a release is built: `make release` on a checkout
	// of SourceRepository, whose parameters docs/sbom.md describes.
	BuildType = "https://github.com/handroll/handroll/hack/release@v1"

	// BuilderID is the builder trusted to have run that: a maintainer's
	// machine running `make release` from a clean checkout. Nothing
	// isolates the build from the maintainer; a verifier trusts them.
	BuilderID = "https://github.com/handroll/handroll/hack/release/maintainer@v1"

	// SourceRepository is the repository a release is built from.
	SourceRepository = "https://github.com/handroll/handroll"
)

// ProvenanceInput is what the provenance states.
type ProvenanceInput struct {
	Binaries *Binaries
	Version  string
	Commit   string    // the checkout's commit, which the release is built from
	GoFlags  string    // `go env GOFLAGS` where the binaries were built
	Epoch    time.Time // SOURCE_DATE_EPOCH: the commit's time
	SBOM     []byte    // the SBOM, named as a byproduct by its digest
}

// Provenance is the SLSA v1 provenance predicate of a release, as JSON
// with its fields in the spec's order and two-space indents. Nothing in it
// is of the moment it is made: the times are the commit's, so the same
// commit gives the same bytes.
func Provenance(in ProvenanceInput) ([]byte, error) {
	deps, err := resolvedDependencies(in.Binaries, in.Commit)
	if err != nil {
		return nil, err
	}
	external, err := structpb.NewStruct(map[string]any{
		"version":    in.Version,
		"command":    "make release VERSION=" + in.Version,
		"repository": SourceRepository,
	})
	if err != nil {
		return nil, err
	}
	internal, err := internalParameters(in)
	if err != nil {
		return nil, err
	}
	sbomSum := sha256.Sum256(in.SBOM)
	p := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   external,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: BuilderID},
			Metadata: &slsa.BuildMetadata{
				// A reproducible build has no run of its own to name:
				// any run from this commit gives these bytes.
				InvocationId: in.Version + "+" + in.Commit,
				StartedOn:    timestamppb.New(in.Epoch),
				FinishedOn:   timestamppb.New(in.Epoch),
			},
			Byproducts: []*intoto.ResourceDescriptor{{
				Name:      SBOMFile,
				Digest:    map[string]string{"sha256": hex.EncodeToString(sbomSum[:])},
				MediaType: "application/spdx+json",
			}},
		},
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	raw, err := protojson.Marshal(p)
	if err != nil {
		return nil, err
	}
	// protojson varies its whitespace on purpose, so that no one relies on
	// its bytes; a release does, so they are laid out here.
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// resolvedDependencies is the source at its commit, the Go toolchain and
// every module the binaries link, each by its go.sum hash.
func resolvedDependencies(b *Binaries, commit string) ([]*intoto.ResourceDescriptor, error) {
	deps := []*intoto.ResourceDescriptor{
		{Uri: "git+" + SourceRepository, Digest: map[string]string{"gitCommit": commit}},
		// Named as `go version` names it, by the package URL under which
		// the SBOM lists its standard library.
		{Name: b.GoVersion, Uri: "pkg:golang/stdlib@" + strings.TrimPrefix(b.GoVersion, "go")},
	}
	for _, m := range b.Modules {
		h, err := dirHash(m.Sum)
		if err != nil {
			return nil, fmt.Errorf("%s@%s: %w", m.Module, m.Version, err)
		}
		deps = append(deps, &intoto.ResourceDescriptor{
			Name:   m.Path,
			Uri:    "pkg:golang/" + m.Module + "@" + m.Version,
			Digest: map[string]string{string(intoto.AlgorithmDirHash): h},
		})
	}
	return deps, nil
}

// dirHash is go.sum's "h1:" hash (base64 of a SHA-256 over the module's
// files) as in-toto's dirHash digest writes it: lowercase hex.
func dirHash(sum string) (string, error) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", fmt.Errorf("go.sum hash %q: want h1:", sum)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("go.sum hash %q: want 32 bytes in base64", sum)
	}
	return hex.EncodeToString(raw), nil
}

// internalParameters is what the builder chose rather than the caller:
// the platforms with the settings each binary was built with, GOFLAGS,
// SOURCE_DATE_EPOCH and the Go version.
func internalParameters(in ProvenanceInput) (*structpb.Struct, error) {
	var platforms []any
	settings := map[string]any{}
	for _, name := range in.Binaries.PlatformNames() {
		platforms = append(platforms, name)
		s := map[string]any{}
		for _, kv := range in.Binaries.Platforms[name] {
			s[kv.Key] = kv.Value
		}
		settings[name] = s
	}
	return structpb.NewStruct(map[string]any{
		"platforms":         platforms,
		"buildSettings":     settings,
		"GOFLAGS":           in.GoFlags,
		"SOURCE_DATE_EPOCH": strconv.FormatInt(in.Epoch.Unix(), 10),
		"goVersion":         in.Binaries.GoVersion,
	})
}
