package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
)

// realLicense: an SPDX licence expression, not the absence of one.
func realLicense(s string) bool {
	return s != "" && s != "NOASSERTION" && s != "NONE"
}

func goPURL(p *spdx.Package) string {
	for _, r := range p.PackageExternalReferences {
		if r.RefType == "purl" && strings.HasPrefix(r.Locator, "pkg:golang/") {
			return r.Locator
		}
	}
	return ""
}

// TestSBOMLicenses reads the SBOM back with the SPDX tools: SPDX 2.3,
// created at SOURCE_DATE_EPOCH, named after the release; every Go module
// the binaries record listed at its version, and every Go package in it,
// the standard library and handroll's own module included, with a licence
// declared and concluded.
func TestSBOMLicenses(t *testing.T) {
	files := released(t)
	doc, err := spdxjson.Read(bytes.NewReader(files[SBOMFile]))
	if err != nil {
		t.Fatalf("reading the SBOM back: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != testCreated {
		t.Errorf("SBOM: %s, created %s; want SPDX-2.3, created %s", doc.SPDXVersion, doc.CreationInfo.Created, testCreated)
	}
	if !strings.Contains(doc.DocumentNamespace, testVersion) || !strings.HasSuffix(doc.DocumentNamespace, strings.TrimPrefix(testDigest, "sha256:")) {
		t.Errorf("namespace %q names neither the version nor the digest", doc.DocumentNamespace)
	}
	if doc.DocumentName != "handroll" {
		t.Errorf("document name %q, want handroll", doc.DocumentName)
	}

	listed := map[string]*spdx.Package{} // by purl
	for _, p := range doc.Packages {
		purl := goPURL(p)
		if purl == "" {
			continue
		}
		listed[purl] = p
		if !realLicense(p.PackageLicenseDeclared) || !realLicense(p.PackageLicenseConcluded) {
			t.Errorf("%s: licence declared %q, concluded %q", purl, p.PackageLicenseDeclared, p.PackageLicenseConcluded)
		}
	}
	main, goVersion, mods := deps(t, handrollBinaries(t))
	for _, d := range mods {
		if d.Replace != nil {
			d = d.Replace
		}
		if p := listed["pkg:golang/"+d.Path+"@"+d.Version]; p == nil || p.PackageVersion != d.Version {
			t.Errorf("the SBOM lists no %s at %s, which the binaries link", d.Path, d.Version)
		}
	}
	want := map[string]string{
		"pkg:golang/" + main + "@" + testVersion:                   "Apache-2.0",
		"pkg:golang/stdlib@" + strings.TrimPrefix(goVersion, "go"): "BSD-3-Clause",
	}
	for purl, license := range want {
		if p := listed[purl]; p == nil || p.PackageLicenseDeclared != license {
			t.Errorf("%s: %+v, want it with the licence %s", purl, p, license)
		}
	}
	if len(listed) < len(mods)/len(platforms) {
		t.Errorf("%d Go packages in the SBOM for %d linked modules", len(listed), len(mods))
	}
}

// TestSBOMWithoutLicensesFails: a module cache that holds none of the
// binaries' modules gives no licence, and the release stops rather than
// ship NOASSERTION; syft does not look elsewhere, such as the network.
func TestSBOMWithoutLicensesFails(t *testing.T) {
	bins := handrollBinaries(t)
	env, err := goEnv(context.Background(), "GOROOT")
	if err != nil {
		t.Fatal(err)
	}
	_, err = SBOM(context.Background(), SBOMInput{
		Binaries: bins, MainModule: "github.com/handroll/handroll", Version: testVersion, ImageDigest: testDigest,
		License: "../../LICENSE", GoLicense: filepath.Join(env["GOROOT"], "LICENSE"), ModCache: t.TempDir(), Created: time.Unix(0, 0),
	})
	if err == nil || !strings.Contains(err.Error(), "no licence found in the module cache for") || !strings.Contains(err.Error(), "k8s.io/client-go@") {
		t.Errorf("an empty module cache: %v", err)
	}
}

func TestStageBinariesRefusesOneNameTwice(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "handroll"), filepath.Join(t.TempDir(), "handroll")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stageBinaries([]string{a, b}); err == nil || !strings.Contains(err.Error(), "have one name") {
		t.Errorf("two binaries named handroll: %v", err)
	}
}
