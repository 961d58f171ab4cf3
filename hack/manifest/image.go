package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// imageRef is an image reference as make's IMG and CHART_IMG give it.
type imageRef struct {
	name   string // [host[:port]/]path
	tag    string // may be empty
	digest string // sha256:<64 hex digits>, or empty
}

// The reference grammar of the distribution project, less IPv6 hosts:
// a name is an optional host (with a port) and lower-case path components.
var (
	hostPart  = `[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?`
	component = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	nameRE    = regexp.MustCompile(`^(?:` + hostPart + `(?:\.` + hostPart + `)*(?::[0-9]+)?/)?` + component + `(?:/` + component + `)*$`)
	tagRE     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// parseImage splits name[:tag][@digest]. A colon before the last slash
// belongs to a registry's port, not to a tag.
func parseImage(s string) (imageRef, error) {
	var r imageRef
	rest := s
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest, r.digest = rest[:i], rest[i+1:]
		if !digestRE.MatchString(r.digest) {
			return r, fmt.Errorf("image %q: the digest must be sha256: and 64 hex digits", s)
		}
	}
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		rest, r.tag = rest[:i], rest[i+1:]
		if !tagRE.MatchString(r.tag) {
			return r, fmt.Errorf("image %q: %q is not a tag (letters, digits, _ . -, at most 128)", s, r.tag)
		}
	}
	r.name = rest
	if !nameRE.MatchString(r.name) {
		return r, fmt.Errorf("image %q: %q is not an image name ([host[:port]/]path, the path in lower case)", s, r.name)
	}
	return r, nil
}

// kustomization is the file that sets the operator's image over a base.
type kustomization struct {
	APIVersion string           `yaml:"apiVersion"`
	Kind       string           `yaml:"kind"`
	Resources  []string         `yaml:"resources"`
	Images     []kustomizeImage `yaml:"images"`
}

type kustomizeImage struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag,omitempty"`
	Digest  string `yaml:"digest,omitempty"`
}

func runKustomization(args []string) error {
	fs := flag.NewFlagSet("kustomization", flag.ContinueOnError)
	base := fs.String("base", "", "the kustomization to build on")
	img := fs.String("image", "", "the operator's image, name[:tag][@digest]")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || *base == "" || *img == "" {
		return errUsage
	}
	if err := os.MkdirAll(fs.Arg(0), 0o755); err != nil {
		return err
	}
	data, err := writeKustomization(fs.Arg(0), *base, *img)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(fs.Arg(0), "kustomization.yaml"), data, 0o644)
}

// defaultImage is the operator's image in manifests/manager, without its
// tag: the project's registry path, never a bare name that a container
// runtime would complete to docker.io/library.
const defaultImage = "ghcr.io/handroll/handroll"

// writeKustomization returns the kustomization.yaml to write into the
// directory out: base, named relative to out, with the operator's image
// (defaultImage, as manifests/manager names it) replaced by img.
func writeKustomization(out, base, img string) ([]byte, error) {
	ref, err := parseImage(img)
	if err != nil {
		return nil, err
	}
	rel, err := relativeDir(out, base)
	if err != nil {
		return nil, err
	}
	k := kustomization{
		APIVersion: "kustomize.config.k8s.io/v1beta1",
		Kind:       "Kustomization",
		Resources:  []string{rel},
		Images:     []kustomizeImage{{Name: defaultImage, NewName: ref.name, NewTag: ref.tag, Digest: ref.digest}},
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by hack/deploy.sh: %s with the image %s.\n", base, img)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(k); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// relativeDir names the directory base from the directory out, both with
// symbolic links resolved, as kustomize resolves them.
func relativeDir(out, base string) (string, error) {
	resolve := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(abs)
	}
	o, err := resolve(out)
	if err != nil {
		return "", err
	}
	b, err := resolve(base)
	if err != nil {
		return "", fmt.Errorf("the base %s: %w", base, err)
	}
	return filepath.Rel(o, b)
}
