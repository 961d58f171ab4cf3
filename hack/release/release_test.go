package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

const (
	testVersion = "v0.1.0"
	testDigest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testEpoch   = "1700000000"
	testCreated = "2023-11-14T22:13:20Z" // testEpoch
)

var platforms = []string{"linux/amd64", "linux/arm64"}

var (
	buildOnce sync.Once
	builtBins []string
	buildErr  error
)

// handrollBinaries builds the operator for both release platforms as `make
// release` does (static, -trimpath, the version stamped in), once for the
// package's tests: the SBOM and the provenance read what the linker
// recorded in the real binaries, which a stand-in of bytes would not have.
func handrollBinaries(t *testing.T) []string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "handroll-release-test-")
		if err != nil {
			buildErr = err
			return
		}
		for _, p := range platforms {
			bin := filepath.Join(dir, "handroll-"+strings.ReplaceAll(p, "/", "-"))
			goos, goarch, _ := strings.Cut(p, "/")
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+testVersion+" -X main.gitCommit="+testCommit,
				"-o", bin, "./cmd/handroll")
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{err: err, out: out}
				return
			}
			builtBins = append(builtBins, bin)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/handroll: %v", buildErr)
	}
	return builtBins
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if len(builtBins) > 0 {
		os.RemoveAll(filepath.Dir(builtBins[0]))
	}
	os.Exit(code)
}

// release fills a fresh release directory as `make release` does before it
// runs this command (fixed stand-ins for install.yaml, the chart and the
// image archive), runs it as the Makefile does and returns the directory's
// files.
func release(t *testing.T, bins []string) map[string][]byte {
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
	t.Setenv("SOURCE_DATE_EPOCH", testEpoch)
	args := []string{"--dir", dir, "--version", testVersion, "--digest", testDigest, "--commit", testCommit, "--license", "../../LICENSE"}
	for _, b := range bins {
		args = append(args, "--binary", b)
	}
	if err := run(context.Background(), args); err != nil {
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

var (
	releaseOnce  sync.Once
	releaseFiles map[string][]byte
)

// released is one release of the real binaries, made once for the tests
// that only read it.
func released(t *testing.T) map[string][]byte {
	t.Helper()
	bins := handrollBinaries(t)
	releaseOnce.Do(func() { releaseFiles = release(t, bins) })
	if releaseFiles == nil {
		t.Fatal("the shared release failed in an earlier test")
	}
	return releaseFiles
}

// TestReleaseReproducible runs the command twice on the same inputs into two
// directories, the binaries the second time in the other order and one of
// them twice: the same files, byte for byte, and SHA256SUMS lists every
// other file with its sum, sorted.
func TestReleaseReproducible(t *testing.T) {
	bins := handrollBinaries(t)
	a := released(t)
	b := release(t, []string{bins[1], bins[0], bins[1]})
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range a {
			if !yield(n) {
				return
			}
		}
	})
	want := []string{SumsFile, "handroll-0.1.0.tgz", "handroll-image.tar", "install.yaml", ProvenanceFile, SBOMFile}
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
}

func TestReleaseRefuses(t *testing.T) {
	dir := t.TempDir()
	ok := []string{"--version", testVersion, "--digest", testDigest, "--commit", testCommit, "--license", "../../LICENSE"}
	with := func(flag, value string) []string {
		args := slices.Clone(ok)
		i := slices.Index(args, flag)
		return append(args[:i], append([]string{flag, value}, args[i+2:]...)...)
	}
	for _, args := range [][]string{
		append(with("--version", "0.1.0"), "--binary", "x"),
		append(with("--digest", "sha256:abc"), "--binary", "x"),
		append(with("--commit", "0123456"), "--binary", "x"),
		append(with("--license", ""), "--binary", "x"),
		ok,
		append(slices.Clone(ok), "--binary", filepath.Join(dir, "missing")),
	} {
		if err := run(context.Background(), append([]string{"--dir", dir}, args...)); err == nil {
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

// TestReadBinariesRefusesOtherReleases: binaries of two main modules, or
// two builds for one platform, are not one release.
func TestReadBinariesRefusesOtherReleases(t *testing.T) {
	bins := handrollBinaries(t)
	self, err := os.Executable() // this test: another main module
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBinaries([]string{bins[0], self}); err == nil || !strings.Contains(err.Error(), "not one release") {
		t.Errorf("handroll and the test binary: %v", err)
	}
	bi, err := buildinfo.ReadFile(bins[0])
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "handroll-linux-amd64")
	cmd := exec.Command("go", "build", "-trimpath", "-o", other, "./cmd/handroll")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v3", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := ReadBinaries([]string{bins[0], other}); err == nil || !strings.Contains(err.Error(), "a second linux/amd64 binary") {
		t.Errorf("two linux/amd64 builds of %s: %v", bi.Main.Path, err)
	}
}

// TestMakeReleaseRefusesVersion: `make release` with a VERSION that is not
// the VERSION file's stops before it builds or removes anything.
func TestMakeReleaseRefusesVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("../..")
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

// deps is the modules the binaries record, each as the linker wrote it.
func deps(t *testing.T, bins []string) (main string, goVersion string, mods []*debug.Module) {
	t.Helper()
	for _, b := range bins {
		bi, err := buildinfo.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		main, goVersion = bi.Main.Path, bi.GoVersion
		mods = append(mods, bi.Deps...)
	}
	if len(mods) < 20 {
		t.Fatalf("the binaries record %d modules; handroll links client-go and more", len(mods))
	}
	return main, goVersion, mods
}
