package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/anchore/syft/syft"
	"github.com/anchore/syft/syft/cataloging"
	"github.com/anchore/syft/syft/cataloging/pkgcataloging"
	"github.com/anchore/syft/syft/format/spdxjson"
	"github.com/anchore/syft/syft/pkg/cataloger/golang"
	"github.com/anchore/syft/syft/source"
	"github.com/anchore/syft/syft/source/directorysource"
)

// SBOMFile is the SBOM's name in the release directory.
const SBOMFile = "sbom.spdx.json"

// goBinaryCataloger is the name of syft's cataloger of Go binaries' build
// information, the only cataloger a release needs.
const goBinaryCataloger = "go-module-binary-cataloger"

// SBOMInput is what the SBOM is made of.
type SBOMInput struct {
	Binaries    []string  // the released binaries, one per platform
	MainModule  string    // the binaries' main module, handroll's own
	Version     string    // the release's version
	ImageDigest string    // the image index the binaries went into
	License     string    // the repository's LICENSE file: the main module's licence
	GoLicense   string    // the Go toolchain's LICENSE file: the standard library's
	ModCache    string    // the Go module cache the licences are read from
	Created     time.Time // the SBOM's creation time: SOURCE_DATE_EPOCH
}

// SBOM catalogs the binaries with syft's Go binary cataloger and encodes the
// result with syft's SPDX 2.3 JSON encoder. Each module's licence is read
// from its directory in the local module cache, which the build that made
// the binaries has just filled; syft never asks the network (settleLicenses
// says which licence is declared and which concluded).
func SBOM(ctx context.Context, in SBOMInput) ([]byte, error) {
	stage, err := stageBinaries(in.Binaries)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)

	// Named for the release, so that the source's ID, the document's name
	// and the root package owe nothing to the staging directory's path.
	src, err := directorysource.New(directorysource.Config{
		Path:  stage,
		Base:  stage,
		Alias: source.Alias{Name: baseName(in.MainModule), Version: in.Version},
	})
	if err != nil {
		return nil, err
	}
	gocfg := golang.DefaultCatalogerConfig().
		WithSearchLocalModCacheLicenses(true).
		WithLocalModCacheDir(in.ModCache).
		WithSearchLocalVendorLicenses(false).
		WithSearchRemoteLicenses(false)
	cfg := syft.DefaultCreateSBOMConfig().
		WithPackagesConfig(pkgcataloging.DefaultConfig().WithGolangConfig(gocfg)).
		WithCatalogerSelection(cataloging.NewSelectionRequest().WithDefaults(goBinaryCataloger))
	s, err := syft.CreateSBOM(ctx, src, cfg)
	if err != nil {
		return nil, fmt.Errorf("syft: %w", err)
	}
	if err := settleLicenses(ctx, cfg, s, in); err != nil {
		return nil, err
	}

	enc, err := spdxjson.NewFormatEncoderWithConfig(spdxjson.EncoderConfig{Version: "2.3", Pretty: true})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := enc.Encode(&buf, *s); err != nil {
		return nil, err
	}
	// Unique per release and image, and the same each time either is built
	// again: a URI no one need serve (SPDX 2.3 section 6.5).
	namespace := fmt.Sprintf("https://%s/spdx/%s-%s", in.MainModule, in.Version, strings.TrimPrefix(in.ImageDigest, "sha256:"))
	return pinDocument(buf.Bytes(), namespace, in.Created)
}

// stageBinaries links (else copies) the binaries into a directory of their
// own, under their base names, so that syft sees these files and no others
// and names each by its base name alone.
func stageBinaries(binaries []string) (_ string, err error) {
	dir, err := os.MkdirTemp("", "handroll-sbom-")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	staged := map[string]string{}
	for _, b := range binaries {
		abs, err := filepath.Abs(b)
		if err != nil {
			return "", err
		}
		name := filepath.Base(abs)
		switch prev, ok := staged[name]; {
		case ok && prev == abs:
			continue
		case ok:
			return "", fmt.Errorf("%s and %s have one name: a release names each platform's binary apart", prev, abs)
		}
		staged[name] = abs
		if err := linkOrCopy(abs, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func linkOrCopy(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pinDocument replaces the two values syft makes afresh on every run, a
// random document namespace and the wall-clock creation time, in syft's
// encoding and nowhere else, so that the same binaries give the same bytes.
func pinDocument(doc []byte, namespace string, created time.Time) ([]byte, error) {
	var head struct {
		DocumentNamespace string `json:"documentNamespace"`
		CreationInfo      struct {
			Created string `json:"created"`
		} `json:"creationInfo"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	for _, r := range []struct{ key, old, new string }{
		{"documentNamespace", head.DocumentNamespace, namespace},
		{"created", head.CreationInfo.Created, created.UTC().Format(time.RFC3339)},
	} {
		from, to := jsonField(r.key, r.old), jsonField(r.key, r.new)
		if n := bytes.Count(doc, from); n != 1 {
			return nil, fmt.Errorf("syft's SPDX document holds %s %d times, want once", from, n)
		}
		doc = bytes.Replace(doc, from, to, 1)
	}
	return doc, nil
}

// jsonField is `"key": "value"` as syft's pretty encoder writes it: HTML
// characters unescaped.
func jsonField(key, value string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key) // a string always encodes
	buf.Truncate(buf.Len() - 1)
	buf.WriteString(": ")
	_ = enc.Encode(value)
	buf.Truncate(buf.Len() - 1)
	return buf.Bytes()
}

// goEnv is `go env` of the given variables: the toolchain's view, with
// what `go env -w` set as well as the environment.
func goEnv(ctx context.Context, names ...string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "go", append([]string{"env", "-json"}, names...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	return env, nil
}

func baseName(path string) string {
	return path[strings.LastIndex(path, "/")+1:]
}
