package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushMain is `image push`: it pushes the image index of an archive that
// the build wrote to a registry, with the credentials docker login leaves
// (authn.DefaultKeychain: $DOCKER_CONFIG/config.json, else
// ~/.docker/config.json, and the credential helpers they name), and prints
// the pushed digest as the last line.
func pushMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	archive := fs.String("archive", ".local/image/handroll.tar", "the OCI archive the build wrote")
	ref := fs.String("tag", "", "where to push: registry-host/repository:tag")
	insecure := fs.Bool("insecure", envBool("REGISTRY_INSECURE"),
		"allow plain HTTP, to a registry on localhost or a loopback address only (default: $REGISTRY_INSECURE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("push: unexpected arguments: %q", fs.Args())
	}
	if *ref == "" {
		return errors.New("push: --tag is required, e.g. --tag localhost:5000/handroll:v0.1.0")
	}
	tag, err := PushTag(*ref, *insecure)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "image-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	idx, err := ReadArchive(*archive, dir)
	if err != nil {
		return fmt.Errorf("push: %s: %w", *archive, err)
	}
	digest, err := Push(ctx, tag, idx, *insecure, authn.DefaultKeychain)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image: pushed %s (%s) to %s\n", *archive, digest, tag)
	fmt.Fprintln(stdout, digest.String())
	return nil
}

// envBool reads a boolean environment variable; anything strconv does not
// read as true is false.
func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

// PushTag checks where an image is to be pushed: a full reference with a
// registry host and a tag (as ParseTag wants), and --insecure only for a
// registry on this machine's loopback, where plain HTTP crosses no network.
func PushTag(ref string, insecure bool) (name.Tag, error) {
	full, _, err := ParseTag(ref)
	if err != nil {
		return name.Tag{}, err
	}
	var opts []name.Option
	if insecure {
		t, _ := name.NewTag(full)
		if host := t.RegistryStr(); !IsLoopback(host) {
			return name.Tag{}, fmt.Errorf("--insecure (REGISTRY_INSECURE=true): plain HTTP is allowed to localhost or a loopback address only, not to %s", host)
		}
		opts = append(opts, name.Insecure)
	}
	return name.NewTag(full, append(opts, name.StrictValidation)...)
}

// IsLoopback reports whether a registry host[:port] is localhost or a
// loopback IP address.
func IsLoopback(hostPort string) bool {
	host := hostPort
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Push writes idx, its images and their blobs to tag and returns the
// index's digest, after checking that the registry serves that digest under
// the tag. Without insecure every request is HTTPS: go-containerregistry
// would otherwise fall back to plain HTTP for localhost, loopback and
// private addresses on its own.
func Push(ctx context.Context, tag name.Tag, idx v1.ImageIndex, insecure bool, keychain authn.Keychain) (v1.Hash, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	rt := remote.DefaultTransport
	if !insecure {
		rt = httpsOnly{rt}
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain), remote.WithTransport(rt)}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", tag, err)
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: reading the tag back: %w", tag, err)
	}
	if desc.Digest != digest {
		return v1.Hash{}, fmt.Errorf("push %s: the registry serves %s under the tag, not the pushed %s", tag, desc.Digest, digest)
	}
	return digest, nil
}

type httpsOnly struct{ next http.RoundTripper }

func (t httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		return nil, fmt.Errorf("refusing plain HTTP to %s: pass --insecure (REGISTRY_INSECURE=true) for a registry on localhost or a loopback address", r.URL.Host)
	}
	return t.next.RoundTrip(r)
}

// ReadArchive reads an OCI archive as WriteArchive writes it: an image
// layout in a tar whose index.json names one image index, which it returns.
// The archive is unpacked into dir, from which the blobs are read while the
// index is used: the caller removes dir when done.
func ReadArchive(path, dir string) (v1.ImageIndex, error) {
	if err := untar(path, dir); err != nil {
		return nil, err
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("index.json holds %d entries; want one image index, as `make image` writes", len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// untar extracts the regular files and directories of the tar at path into
// dir, refusing any name that would land outside it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("entry %q: not a relative path inside the archive", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := writeFrom(target, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %c, want files and directories only", hdr.Name, hdr.Typeflag)
		}
	}
}

func writeFrom(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
