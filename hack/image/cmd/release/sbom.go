package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

// SBOMFile is the SBOM's name in the release directory.
const SBOMFile = "sbom.spdx.json"

// SBOM is the SPDX 2.3 JSON document of the binaries' Go modules: the main
// module at version, the Go standard library at the toolchain's version,
// and every dependency as the linker recorded it (a replacement in its
// replaced module's place), each with its package URL. All binaries must
// record the same modules: they are one release built for several
// platforms.
func SBOM(binaries []string, version, imageDigest string, created time.Time) ([]byte, error) {
	var first *debug.BuildInfo
	for _, path := range binaries {
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if first == nil {
			first = bi
			continue
		}
		if a, b := moduleList(first), moduleList(bi); bi.GoVersion != first.GoVersion || bi.Main.Path != first.Main.Path || !slices.Equal(a, b) {
			return nil, fmt.Errorf("%s records other modules than %s: not one release", path, binaries[0])
		}
	}
	doc := document(first, version, imageDigest, created)
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func document(bi *debug.BuildInfo, version, imageDigest string, created time.Time) *spdx.Document {
	mainID := elementID(bi.Main.Path)
	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   fmt.Sprintf("%s-%s", baseName(bi.Main.Path), version),
		// Unique per release and image, and the same each time either is
		// built again: a URI no one need serve (SPDX 2.3 section 6.5).
		DocumentNamespace: fmt.Sprintf("https://%s/spdx/%s-%s", bi.Main.Path, version, strings.TrimPrefix(imageDigest, "sha256:")),
		DocumentComment:   "The Go modules linked into the operator image " + imageDigest + ", read from the binaries' build information.",
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "handroll-release-" + version}},
			Created:  created.UTC().Format(time.RFC3339),
		},
		Packages: []*spdx.Package{
			pkg(mainID, bi.Main.Path, version, "APPLICATION"),
			pkg(elementID("stdlib"), "stdlib", bi.GoVersion, "LIBRARY"),
		},
		Relationships: []*spdx.Relationship{{
			RefA:         common.MakeDocElementID("", "DOCUMENT"),
			RefB:         common.MakeDocElementID("", string(mainID)),
			Relationship: common.TypeRelationshipDescribe,
		}},
	}
	doc.Packages[0].PackageLicenseDeclared = "Apache-2.0" // the LICENSE file
	seen := map[common.ElementID]bool{mainID: true, elementID("stdlib"): true}
	for _, m := range moduleList(bi) {
		path, v, _ := strings.Cut(m, "@")
		id := elementID(m)
		// Paths that differ in punctuation alone would meet on one ID.
		for n := 2; seen[id]; n++ {
			id = elementID(fmt.Sprintf("%s-%d", m, n))
		}
		seen[id] = true
		doc.Packages = append(doc.Packages, pkg(id, path, v, "LIBRARY"))
	}
	for _, p := range doc.Packages[1:] {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA:         common.MakeDocElementID("", string(mainID)),
			RefB:         common.MakeDocElementID("", string(p.PackageSPDXIdentifier)),
			Relationship: common.TypeRelationshipDependsOn,
		})
	}
	return doc
}

// moduleList is the binary's dependencies as sorted path@version, each
// replacement under the path it replaces, at the replacement's version.
func moduleList(bi *debug.BuildInfo) []string {
	var mods []string
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		mods = append(mods, d.Path+"@"+v)
	}
	slices.Sort(mods)
	return mods
}

func pkg(id common.ElementID, path, version, purpose string) *spdx.Package {
	return &spdx.Package{
		PackageName:             path,
		PackageSPDXIdentifier:   id,
		PackageVersion:          version,
		PackageDownloadLocation: "NOASSERTION",
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  "NOASSERTION",
		PackageCopyrightText:    "NOASSERTION",
		PrimaryPackagePurpose:   purpose,
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager,
			RefType:  common.TypePackageManagerPURL,
			Locator:  "pkg:golang/" + path + "@" + version,
		}},
	}
}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// elementID is an SPDX identifier for s: its letters, digits, '.' and '-',
// anything else as '-'.
func elementID(s string) common.ElementID {
	return common.ElementID("Package-" + notIDChar.ReplaceAllString(s, "-"))
}

func baseName(path string) string {
	return path[strings.LastIndex(path, "/")+1:]
}
