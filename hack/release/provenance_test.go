package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The in-toto digest set spec's own example of a module's go.sum hash.
func TestDirHash(t *testing.T) {
	got, err := dirHash("h1:Khu2En+0gcYPZ2kuIihfswbzxv/mIHXgzPZ018Oty48=")
	if want := "2a1bb6127fb481c60f67692e22285fb306f3c6ffe62075e0ccf674d7c3adcb8f"; err != nil || got != want {
		t.Errorf("dirHash: %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"", "Khu2En+0gcYPZ2kuIihfswbzxv/mIHXgzPZ018Oty48=", "h1:Khu2En", "h1:!!"} {
		if _, err := dirHash(bad); err == nil {
			t.Errorf("dirHash(%q) accepted", bad)
		}
	}
}

// provenance is the predicate's JSON as a verifier reads it, by the SLSA
// v1 spec's field names, with no Go type of ours in between.
type provenance struct {
	BuildDefinition struct {
		BuildType          string            `json:"buildType"`
		ExternalParameters map[string]string `json:"externalParameters"`
		InternalParameters struct {
			Platforms       []string                     `json:"platforms"`
			BuildSettings   map[string]map[string]string `json:"buildSettings"`
			GOFLAGS         *string                      `json:"GOFLAGS"`
			SourceDateEpoch string                       `json:"SOURCE_DATE_EPOCH"`
			GoVersion       string                       `json:"goVersion"`
		} `json:"internalParameters"`
		ResolvedDependencies []resource `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Metadata struct {
			InvocationID string `json:"invocationId"`
			StartedOn    string `json:"startedOn"`
			FinishedOn   string `json:"finishedOn"`
		} `json:"metadata"`
		Byproducts []resource `json:"byproducts"`
	} `json:"runDetails"`
}

type resource struct {
	Name      string            `json:"name"`
	URI       string            `json:"uri"`
	Digest    map[string]string `json:"digest"`
	MediaType string            `json:"mediaType"`
}

// TestProvenance checks every field docs/sbom.md promises, and that the
// predicate is SLSA v1 as in-toto's own types read it, strictly.
func TestProvenance(t *testing.T) {
	files := released(t)
	data := files[ProvenanceFile]
	if err := protojson.Unmarshal(data, &slsa.Provenance{}); err != nil {
		t.Errorf("in-toto's SLSA v1 type does not read the predicate: %v", err)
	}
	var p provenance
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	bd, rd := p.BuildDefinition, p.RunDetails
	if bd.BuildType != BuildType || rd.Builder.ID != BuilderID {
		t.Errorf("buildType %q, builder %q", bd.BuildType, rd.Builder.ID)
	}
	wantExt := map[string]string{"version": testVersion, "command": "make release VERSION=" + testVersion, "repository": "https://github.com/handroll/handroll"}
	if !maps.Equal(bd.ExternalParameters, wantExt) {
		t.Errorf("externalParameters %v, want %v", bd.ExternalParameters, wantExt)
	}
	main, goVersion, mods := deps(t, handrollBinaries(t))
	in := bd.InternalParameters
	if !slices.Equal(in.Platforms, platforms) || in.GOFLAGS == nil || in.SourceDateEpoch != testEpoch || in.GoVersion != goVersion {
		t.Errorf("internalParameters: platforms %v, GOFLAGS %v, SOURCE_DATE_EPOCH %q, goVersion %q", in.Platforms, in.GOFLAGS, in.SourceDateEpoch, in.GoVersion)
	}
	for _, pl := range platforms {
		s := in.BuildSettings[pl]
		if s["-trimpath"] != "true" || s["CGO_ENABLED"] != "0" || s["GOOS"]+"/"+s["GOARCH"] != pl {
			t.Errorf("buildSettings[%s] = %v", pl, s)
		}
	}

	byURI := map[string]resource{}
	for _, r := range bd.ResolvedDependencies {
		byURI[r.URI] = r
	}
	if src := bd.ResolvedDependencies[0]; src.URI != "git+https://github.com/handroll/handroll" || !maps.Equal(src.Digest, map[string]string{"gitCommit": testCommit}) {
		t.Errorf("the first resolved dependency %+v, want the source at its commit", src)
	}
	if r, ok := byURI["pkg:golang/stdlib@"+strings.TrimPrefix(goVersion, "go")]; !ok || r.Name != goVersion {
		t.Errorf("no Go toolchain %s among the resolved dependencies", goVersion)
	}
	for _, d := range mods {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		h, err := dirHash(m.Sum)
		if err != nil {
			t.Fatal(err)
		}
		r := byURI["pkg:golang/"+m.Path+"@"+m.Version]
		if r.Name != d.Path || !maps.Equal(r.Digest, map[string]string{"dirHash": h}) {
			t.Errorf("%s@%s (%s): resolved as %+v", d.Path, m.Version, m.Sum, r)
		}
	}
	if n := len(bd.ResolvedDependencies); n != len(mods)/len(platforms)+2 {
		t.Errorf("%d resolved dependencies; the binaries link %d modules each, and the source and Go make two more", n, len(mods)/len(platforms))
	}
	if _, ok := byURI["pkg:golang/"+main+"@"+testVersion]; ok {
		t.Errorf("the main module is among its own dependencies")
	}

	md := rd.Metadata
	if md.InvocationID != testVersion+"+"+testCommit || md.StartedOn != testCreated || md.FinishedOn != testCreated {
		t.Errorf("metadata %+v: want %s+%s, started and finished at the commit's time %s", md, testVersion, testCommit, testCreated)
	}
	sum := sha256.Sum256(files[SBOMFile])
	if len(rd.Byproducts) != 1 || rd.Byproducts[0].Name != SBOMFile || rd.Byproducts[0].Digest["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("byproducts %+v, want the SBOM by its sha256", rd.Byproducts)
	}
}
