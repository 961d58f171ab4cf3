package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the numeric user and group every image runs as: not root, and
// numeric so that the kubelet can enforce runAsNonRoot without an
// /etc/passwd in the image.
const User = "65532:65532"

// The annotations on the archive's index.json entry. containerd names the
// image it imports after the first; other OCI tools read the second, which by
// the image-layout spec holds the tag alone.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// The OCI image-spec's pre-defined annotation keys the build sets.
const (
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelLicenses = "org.opencontainers.image.licenses"
)

// Labels are the image's descriptive OCI annotations; empty fields are left
// out.
type Labels struct {
	Title, Version, Revision, Source, Licenses string
}

// Map is the labels by key, with created added when any other is set; nil
// when none is.
func (l Labels) Map(created time.Time) map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{
		LabelTitle: l.Title, LabelVersion: l.Version, LabelRevision: l.Revision,
		LabelSource: l.Source, LabelLicenses: l.Licenses,
	} {
		if v != "" {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	m[LabelCreated] = created.UTC().Format(time.RFC3339)
	return m
}

// Binary is one platform's static executable.
type Binary struct {
	Platform v1.Platform
	Path     string
}

// ParseBinary parses a --binary value: os/arch[/variant]=PATH.
func ParseBinary(s string) (Binary, error) {
	plat, file, ok := strings.Cut(s, "=")
	if !ok || plat == "" || file == "" {
		return Binary{}, fmt.Errorf("--binary %q: want os/arch=PATH, e.g. linux/amd64=bin/handroll-linux-amd64", s)
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return Binary{}, fmt.Errorf("--binary %q: %w", s, err)
	}
	if p.OS == "" || p.Architecture == "" || p.OSVersion != "" {
		return Binary{}, fmt.Errorf("--binary %q: want os/arch[/variant] before the '='", s)
	}
	return Binary{Platform: *p, Path: file}, nil
}

// CreatedTime is the time every timestamp in the image carries: created if
// given (RFC 3339), else SOURCE_DATE_EPOCH (seconds) if set, else the Unix
// epoch. Whole seconds, UTC.
func CreatedTime(created, sourceDateEpoch string) (time.Time, error) {
	switch {
	case created != "":
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return time.Time{}, fmt.Errorf("--created %q: %w", created, err)
		}
		return t.UTC().Truncate(time.Second), nil
	case sourceDateEpoch != "":
		n, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds", sourceDateEpoch)
		}
		return time.Unix(n, 0).UTC(), nil
	default:
		return time.Unix(0, 0).UTC(), nil
	}
}

// ParseTag checks the image reference and returns it with its tag part. It
// must name a registry host (localhost/handroll:dev, not handroll:dev) and a
// tag: containerd keeps the name exactly as imported, while the kubelet
// looks an image up by its fully qualified name, so a short name would
// never be found.
func ParseTag(ref string) (full, tag string, err error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return "", "", fmt.Errorf("--tag %q: want registry-host/repository:tag, e.g. localhost/handroll:dev: %w", ref, err)
	}
	first, _, _ := strings.Cut(ref, "/")
	if !strings.Contains(ref, "/") || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "", "", fmt.Errorf("--tag %q: name a registry host first (e.g. localhost/%s), as the kubelet will look for the fully qualified name", ref, ref)
	}
	return ref, t.TagStr(), nil
}

// LayerTar is the uncompressed layer: one regular file, /name, mode 0755,
// owned by 0:0, with the given modification time.
func LayerTar(fileName string, data []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     fileName,
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  mtime,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Gzip compresses with a fixed level and an empty header (no name, no
// modification time), so the same input always gives the same bytes.
func Gzip(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image is one platform's image: the empty base, one gzip-compressed layer
// holding data at /fileName, and a config that runs it as User and carries
// labels.
func Image(p v1.Platform, fileName string, data []byte, created time.Time, labels map[string]string) (v1.Image, error) {
	layerTar, err := LayerTar(fileName, data, created)
	if err != nil {
		return nil, err
	}
	compressed, err := Gzip(layerTar)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	diffID, err := layer.DiffID()
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	at := v1.Time{Time: created}
	return mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      at,
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{"/" + fileName},
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
		History: []v1.History{{
			Created:   at,
			CreatedBy: fmt.Sprintf("COPY %s /%s", fileName, fileName),
			Comment:   "hack/image",
		}},
	})
}

// Index is the multi-platform image index over one image per binary,
// ordered by platform whatever the order the binaries were given in, with
// labels on each image's config and as the index's annotations. The
// platforms' layers are compressed in parallel.
func Index(binaries []Binary, fileName string, created time.Time, labels map[string]string) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("no --binary given")
	}
	sorted := slices.Clone(binaries)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Platform.String() < sorted[j].Platform.String() })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Platform.String() == sorted[i-1].Platform.String() {
			return nil, fmt.Errorf("--binary: %s given twice", sorted[i].Platform.String())
		}
	}

	images := make([]v1.Image, len(sorted))
	errs := make([]error, len(sorted))
	var wg sync.WaitGroup
	for i, b := range sorted {
		wg.Go(func() {
			data, err := os.ReadFile(b.Path)
			if err == nil {
				images[i], err = Image(b.Platform, fileName, data, created, labels)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", b.Platform.String(), err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	if labels != nil {
		idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	}
	for i, b := range sorted {
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        plainImage{images[i]},
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	return idx, nil
}

// plainImage leaves artifactType out of the image's descriptor in the
// index, where go-containerregistry would otherwise copy the config's media
// type: these are images, not artifacts, and their descriptors read as any
// image index's do.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }

// WriteArchive writes idx as an OCI image layout packed in a tar (an
// "oci-archive"): oci-layout, index.json with one entry for idx annotated
// with annotations, and every blob under blobs/sha256/. Entries are sorted,
// every header carries mtime, owner 0:0 and fixed modes, so the same index
// gives the same bytes.
func WriteArchive(w io.Writer, idx v1.ImageIndex, annotations map[string]string, mtime time.Time) error {
	blobs := map[v1.Hash][]byte{}
	add := func(data []byte) v1.Hash {
		h, _, _ := v1.SHA256(bytes.NewReader(data))
		blobs[h] = data
		return h
	}

	rawIndex, err := idx.RawManifest()
	if err != nil {
		return err
	}
	indexDigest := add(rawIndex)
	if err := addImages(idx, add); err != nil {
		return err
	}

	top, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   types.OCIImageIndex,
			Size:        int64(len(rawIndex)),
			Digest:      indexDigest,
			Annotations: annotations,
		}},
	})
	if err != nil {
		return err
	}
	return writeLayout(w, top, blobs, mtime)
}

// addImages adds the manifest, config and compressed layers of each of
// idx's images, and fails when a manifest or layer does not hash to the
// digest that names it: the archive must hold the blobs its manifests cite.
func addImages(idx v1.ImageIndex, add func([]byte) v1.Hash) error {
	manifest, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range manifest.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		raw, err := img.RawManifest()
		if err != nil {
			return err
		}
		if got := add(raw); got != d.Digest {
			return fmt.Errorf("manifest %s hashes to %s", d.Digest, got)
		}
		cfg, err := img.RawConfigFile()
		if err != nil {
			return err
		}
		add(cfg)
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return err
			}
			want, err := l.Digest()
			if err != nil {
				return err
			}
			if got := add(data); got != want {
				return fmt.Errorf("layer %s hashes to %s", want, got)
			}
		}
	}
	return nil
}

// writeLayout writes the tar of WriteArchive: the directories, index.json
// (top), oci-layout and the blobs, sorted by name, every header with mtime
// and fixed modes, so that the same index gives the same bytes.
func writeLayout(w io.Writer, top []byte, blobs map[v1.Hash][]byte, mtime time.Time) error {
	type entry struct {
		name string
		data []byte // nil: a directory
	}
	entries := []entry{
		{name: "blobs/"},
		{name: "blobs/sha256/"},
		{name: "index.json", data: top},
		{name: "oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	for h, data := range blobs {
		entries = append(entries, entry{name: path.Join("blobs", h.Algorithm, h.Hex), data: data})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, ModTime: mtime, Format: tar.FormatUSTAR}
		if e.data == nil {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
