package main

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
)

// Binaries is what the released binaries' build information records: one
// main module and toolchain, a platform each, and the modules they link.
type Binaries struct {
	MainModule string
	GoVersion  string
	// Platforms is each binary's GOOS/GOARCH with the build settings the
	// linker recorded (-trimpath, -ldflags, CGO_ENABLED, GOAMD64...).
	Platforms map[string][]debug.BuildSetting
	// Modules is every module any binary links, sorted by path.
	Modules []Module
}

// Module is a linked module as go.sum pins it: a replacement under the
// path it replaces, at the replacement's path, version and hash.
type Module struct {
	Path    string // the path the code imports
	Module  string // the module the code came from: Path, or its replacement
	Version string
	Sum     string // go.sum's "h1:" hash of the module's files
}

// ReadBinaries reads the binaries' build information. They must be one
// release: the same main module, built by the same Go, one per platform.
func ReadBinaries(paths []string) (*Binaries, error) {
	var b *Binaries
	mods := map[string]Module{}
	for _, path := range paths {
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if b == nil {
			b = &Binaries{MainModule: bi.Main.Path, GoVersion: bi.GoVersion, Platforms: map[string][]debug.BuildSetting{}}
		}
		if bi.Main.Path != b.MainModule || bi.GoVersion != b.GoVersion {
			return nil, fmt.Errorf("%s is %s built by %s, %s is %s built by %s: not one release",
				paths[0], b.MainModule, b.GoVersion, path, bi.Main.Path, bi.GoVersion)
		}
		platform := setting(bi, "GOOS") + "/" + setting(bi, "GOARCH")
		if prev, ok := b.Platforms[platform]; ok && !slices.Equal(prev, bi.Settings) {
			return nil, fmt.Errorf("%s: a second %s binary, built otherwise", path, platform)
		}
		b.Platforms[platform] = bi.Settings
		for _, d := range bi.Deps {
			m := module(d)
			if m.Sum == "" {
				return nil, fmt.Errorf("%s: %s@%s has no go.sum hash (a directory replacement?): a release links modules only", path, m.Module, m.Version)
			}
			// One go.mod: each path at one version, whatever the platform.
			if prev, ok := mods[m.Path]; ok && prev != m {
				return nil, fmt.Errorf("%s: %s is %s@%s (%s), another binary's is %s@%s (%s)",
					path, m.Path, m.Module, m.Version, m.Sum, prev.Module, prev.Version, prev.Sum)
			}
			mods[m.Path] = m
		}
	}
	if b == nil {
		return nil, fmt.Errorf("no binary given")
	}
	for _, m := range mods {
		b.Modules = append(b.Modules, m)
	}
	slices.SortFunc(b.Modules, func(x, y Module) int { return strings.Compare(x.Path, y.Path) })
	return b, nil
}

// PlatformNames is Platforms' keys, sorted.
func (b *Binaries) PlatformNames() []string {
	var names []string
	for p := range b.Platforms {
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}

func module(d *debug.Module) Module {
	if r := d.Replace; r != nil {
		return Module{Path: d.Path, Module: r.Path, Version: r.Version, Sum: r.Sum}
	}
	return Module{Path: d.Path, Module: d.Path, Version: d.Version, Sum: d.Sum}
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
