package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/anchore/syft/syft"
	"github.com/anchore/syft/syft/file"
	"github.com/anchore/syft/syft/license"
	"github.com/anchore/syft/syft/pkg"
	"github.com/anchore/syft/syft/sbom"
)

// settleLicenses gives every Go module package of the SBOM a declared and a
// concluded licence, or fails: a release does not ship NOASSERTION.
//
// syft concludes a module's licence from every licence file in its module
// cache directory, third-party code in subdirectories included, and
// declares none; the authors' declaration is the licence file at the
// module's root, so its licences are declared too. handroll's own module is
// in no module cache: both are syft's reading of the repository's LICENSE,
// and its version, which -trimpath keeps out of the build information, is
// the release's. The standard library is declared BSD-3-Clause by syft; the
// toolchain's LICENSE gives the conclusion.
func settleLicenses(ctx context.Context, cfg *syft.CreateSBOMConfig, s *sbom.SBOM, in SBOMInput) error {
	ctx, err := syft.SetContextLicenseScanner(ctx, cfg.Licenses)
	if err != nil {
		return err
	}
	own, err := scanLicense(ctx, in.License)
	if err != nil {
		return err
	}
	goLicense, err := scanLicense(ctx, in.GoLicense)
	if err != nil {
		return err
	}
	mods := s.Artifacts.Packages.Sorted(pkg.GoModulePkg)
	if !slices.ContainsFunc(mods, func(p pkg.Package) bool { return p.Name == in.MainModule }) {
		return fmt.Errorf("syft found no package of the main module %s in the binaries", in.MainModule)
	}
	var missing []string
	for _, p := range mods {
		id := p.ID()
		switch p.Name {
		case in.MainModule:
			setVersion(&p, in.Version)
			p.Licenses = pkg.NewLicenseSet(slices.Concat(own, as(own, license.Declared))...)
		case "stdlib":
			p.Licenses.Add(goLicense...)
		default:
			p.Licenses.Add(as(rootLicenses(p), license.Declared)...)
		}
		if !has(p.Licenses, license.Declared) || !has(p.Licenses, license.Concluded) {
			missing = append(missing, p.Name+"@"+p.Version)
		}
		// The same ID: the SBOM's relationships name the package by it.
		s.Artifacts.Packages.Delete(id)
		p.OverrideID(id)
		s.Artifacts.Packages.Add(p)
	}
	if len(missing) > 0 {
		return fmt.Errorf("no licence found in the module cache for %s", strings.Join(slices.Compact(missing), ", "))
	}
	return nil
}

// scanLicense is syft's reading of a licence file: each licence it
// recognises, concluded.
func scanLicense(ctx context.Context, path string) ([]pkg.License, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := pkg.NewLicensesFromReadCloserWithContext(ctx, file.NewLocationReadCloser(file.NewLocation("/"+baseName(path)), f))
	found = slices.DeleteFunc(found, func(l pkg.License) bool { return l.SPDXExpression == "" })
	if len(found) == 0 {
		return nil, fmt.Errorf("%s: no licence recognised in it", path)
	}
	return found, nil
}

// rootLicenses is the licences syft found in files at the root of the
// module's directory, among those it found anywhere in it: the URL of each
// is file://$GOPATH/pkg/mod/<module>@<version>/<file>. A file it reads no
// known licence from, such as a NOTICE, declares none.
func rootLicenses(p pkg.Package) []pkg.License {
	var root []pkg.License
	for _, l := range p.Licenses.ToSlice() {
		if l.SPDXExpression == "" {
			continue
		}
		for _, u := range l.URLs {
			_, rest, ok := strings.Cut(u, "@"+p.Version+"/")
			if ok && !strings.Contains(rest, "/") {
				root = append(root, l)
				break
			}
		}
	}
	return root
}

func as(ls []pkg.License, t license.Type) []pkg.License {
	out := make([]pkg.License, len(ls))
	for i, l := range ls {
		l.Type = t
		out[i] = l
	}
	return out
}

func has(ls pkg.LicenseSet, t license.Type) bool {
	return slices.ContainsFunc(ls.ToSlice(), func(l pkg.License) bool { return l.Type == t })
}

// setVersion gives the main module the release's version, in its package
// URL and CPEs too, which syft made without one.
func setVersion(p *pkg.Package, version string) {
	p.Version = version
	p.PURL = "pkg:golang/" + p.Name + "@" + version
	for i := range p.CPEs {
		p.CPEs[i].Attributes.Version = version
	}
}
