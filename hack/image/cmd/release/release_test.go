package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
)

const (
	testVersion = "v0.1.0"
	testDigest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// goBinary builds a real Go program with dependencies, the image tool of
// this module, as the release's binary: what the SBOM reads is what the
// linker records, so a stand-in of bytes would not do.
func goBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "handroll-linux-amd64")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// release fills a fresh release directory as `make release` does before it
// runs this command (fixed stand-ins for install.yaml, the chart and the
// image archive), runs it and returns the directory's files.
func release(t *testing.T, bin string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"install.yaml":       "kind: Namespace\n",
		"handroll-0.1.0.tgz": "chart",
		"handroll-image.tar": "image",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if err := run([]string{"--dir", dir, "--version", testVersion, "--digest", testDigest, "--binary", bin, "--binary", bin}); err != nil {
		t.Fatalf("release: %v", err)
	}
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// TestReleaseReproducible runs the command twice on the same inputs into two
// directories: the same files, byte for byte; SHA256SUMS lists every other
// file with its sum, sorted; and the SBOM is SPDX 2.3 that tools-golang reads
// back, created at SOURCE_DATE_EPOCH, and lists every module the binary's
// build information records.
func TestReleaseReproducible(t *testing.T) {
	bin := goBinary(t)
	a, b := release(t, bin), release(t, bin)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range a {
			if !yield(n) {
				return
			}
		}
	})
	want := []string{SumsFile, "handroll-0.1.0.tgz", "handroll-image.tar", "install.yaml", SBOMFile}
	if !slices.Equal(names, want) {
		t.Fatalf("release directory holds %v, want %v", names, want)
	}
	for _, n := range names {
		if !bytes.Equal(a[n], b[n]) {
			t.Errorf("%s differs between two runs on the same inputs", n)
		}
	}

	var sums []string
	for _, n := range names[1:] {
		sum := sha256.Sum256(a[n])
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+n+"\n")
	}
	if got := string(a[SumsFile]); got != strings.Join(sums, "") {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", got, strings.Join(sums, ""))
	}

	doc, err := spdxjson.Read(bytes.NewReader(a[SBOMFile]))
	if err != nil {
		t.Fatalf("reading the SBOM back: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("SBOM: %s, created %s", doc.SPDXVersion, doc.CreationInfo.Created)
	}
	if !strings.Contains(doc.DocumentNamespace, testVersion) || !strings.HasSuffix(doc.DocumentNamespace, strings.TrimPrefix(testDigest, "sha256:")) {
		t.Errorf("namespace %q names neither the version nor the digest", doc.DocumentNamespace)
	}
	listed := map[string]string{}
	for _, p := range doc.Packages {
		listed[p.PackageName] = p.PackageVersion
		if len(p.PackageExternalReferences) != 1 || p.PackageExternalReferences[0].Locator != "pkg:golang/"+p.PackageName+"@"+p.PackageVersion {
			t.Errorf("package %s: external references %v, want its purl", p.PackageName, p.PackageExternalReferences)
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(bi.Deps) < 3 {
		t.Fatalf("the test binary records %d modules; it should link go-containerregistry and more", len(bi.Deps))
	}
	for _, d := range bi.Deps {
		if listed[d.Path] != d.Version {
			t.Errorf("SBOM lists %s at %q; the binary records %s", d.Path, listed[d.Path], d.Version)
		}
	}
	if listed[bi.Main.Path] != testVersion || listed["stdlib"] != bi.GoVersion {
		t.Errorf("SBOM: main module %s at %q, stdlib at %q; want %s and %s", bi.Main.Path, listed[bi.Main.Path], listed["stdlib"], testVersion, bi.GoVersion)
	}
	if n := len(doc.Relationships); n != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages: want DESCRIBES and one DEPENDS_ON each", n, len(doc.Packages))
	}
}

func TestReleaseRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--version", "0.1.0", "--digest", testDigest, "--binary", "x"},
		{"--version", testVersion, "--digest", "sha256:abc", "--binary", "x"},
		{"--version", testVersion, "--digest", testDigest},
		{"--version", testVersion, "--digest", testDigest, "--binary", filepath.Join(dir, "missing")},
	} {
		if err := run(append([]string{"--dir", dir}, args...)); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Sums(dir); err == nil || !strings.Contains(err.Error(), "sub") {
		t.Errorf("Sums over a directory holding a directory: %v", err)
	}
}

// TestMakeReleaseRefusesVersion: `make release` with a VERSION that is not
// the VERSION file's stops before it builds or removes anything.
func TestMakeReleaseRefusesVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION=v9.9.9", "RELEASE_DIR="+dir)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "release: VERSION=v9.9.9, but the VERSION file holds") {
		t.Errorf("make release VERSION=v9.9.9: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("make release VERSION=v9.9.9 made %s: %v", dir, err)
	}
}
