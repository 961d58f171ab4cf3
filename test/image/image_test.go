package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const (
	tag     = "localhost/handroll:dev"
	created = "2023-11-14T22:13:20Z" // SOURCE_DATE_EPOCH=1700000000
	epoch   = "1700000000"
)

// The OCI types this test reads, as far as it reads them.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type configFile struct {
	Architecture string                     `json:"architecture"`
	OS           string                     `json:"os"`
	Created      time.Time                  `json:"created"`
	Config       map[string]json.RawMessage `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created time.Time `json:"created"`
	} `json:"history"`
}

func TestReproducibleMultiPlatformImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hack/image with go run; not in -short")
	}
	root := repoRoot(t)
	bins := t.TempDir()
	binaries := map[string][]byte{}
	for i, arch := range []string{"amd64", "arm64"} {
		data := standIn(uint64(i+1), fmt.Sprintf("stand-in handroll for linux/%s\n", arch))
		path := filepath.Join(bins, "handroll-linux-"+arch)
		if err := os.WriteFile(path, data, 0o755); err != nil {
			t.Fatal(err)
		}
		binaries[arch] = data
	}

	// The same inputs, but given in the other order, and the time once as
	// SOURCE_DATE_EPOCH and once as --created.
	outA := filepath.Join(t.TempDir(), "handroll.tar")
	digestA := build(t, root, []string{"SOURCE_DATE_EPOCH=" + epoch},
		"--binary", "linux/amd64="+filepath.Join(bins, "handroll-linux-amd64"),
		"--binary", "linux/arm64="+filepath.Join(bins, "handroll-linux-arm64"),
		"--name", "handroll", "--tag", tag, "--out", outA)
	outB := filepath.Join(t.TempDir(), "handroll.tar")
	digestB := build(t, root, nil,
		"--binary", "linux/arm64="+filepath.Join(bins, "handroll-linux-arm64"),
		"--binary", "linux/amd64="+filepath.Join(bins, "handroll-linux-amd64"),
		"--name", "handroll", "--tag", tag, "--created", created, "--out", outB)

	if digestA != digestB {
		t.Errorf("two builds, two digests: %s and %s", digestA, digestB)
	}
	archiveA, err := os.ReadFile(outA)
	if err != nil {
		t.Fatal(err)
	}
	archiveB, err := os.ReadFile(outB)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archiveA, archiveB) {
		t.Errorf("two builds from the same inputs differ: %d and %d bytes", len(archiveA), len(archiveB))
	}
	for _, out := range []string{outA, outB} {
		written, err := os.ReadFile(out + ".digest")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(written)); got != digestA {
			t.Errorf("%s.digest = %q, printed %q", filepath.Base(out), got, digestA)
		}
	}

	checkArchive(t, archiveA, digestA, binaries)
}

// build runs hack/image and returns the digest it prints last.
func build(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(root, "hack", "image"), "run", "."}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=")
	}), append([]string{"GOWORK=off"}, env...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go -C hack/image run . %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "sha256:") || len(last) != len("sha256:")+64 {
		t.Fatalf("last line %q is not a digest; output:\n%s", last, out)
	}
	return last
}

// checkArchive reads the OCI archive and holds it to what `make image`
// promises.
func checkArchive(t *testing.T, archive []byte, digest string, binaries map[string][]byte) {
	t.Helper()
	files := readArchive(t, archive)
	idx := checkImageIndex(t, files, digest)

	for _, m := range idx.Manifests {
		arch := m.Platform.Architecture
		t.Run(arch, func(t *testing.T) {
			checkPlatformImage(t, files, m, binaries[arch])
		})
	}
}

// checkImageIndex checks index.json and the image index it names, which
// must list exactly linux/amd64 and linux/arm64, and returns the latter.
func checkImageIndex(t *testing.T, files map[string][]byte, digest string) index {
	t.Helper()
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	var top index
	unmarshal(t, "index.json", files["index.json"], &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1", len(top.Manifests))
	}
	entry := top.Manifests[0]
	if entry.Digest != digest || entry.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index.json entry: %s %s, want the image index %s", entry.MediaType, entry.Digest, digest)
	}
	wantAnnotations := map[string]string{
		"io.containerd.image.name":          tag,
		"org.opencontainers.image.ref.name": "dev",
	}
	if !maps.Equal(entry.Annotations, wantAnnotations) {
		t.Errorf("index.json annotations = %v, want %v", entry.Annotations, wantAnnotations)
	}

	var idx index
	unmarshal(t, "the image index", blob(t, files, entry), &idx)
	if idx.MediaType != "application/vnd.oci.image.index.v1+json" || idx.SchemaVersion != 2 {
		t.Errorf("image index: mediaType %q, schemaVersion %d", idx.MediaType, idx.SchemaVersion)
	}
	var plats []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %s has no platform", m.Digest)
		}
		plats = append(plats, m.Platform.OS+"/"+m.Platform.Architecture+m.Platform.Variant)
	}
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("index platforms = %v, want exactly linux/amd64 and linux/arm64", plats)
	}
	return idx
}

// checkPlatformImage checks the manifest m names: its media types, its
// config and its one layer, holding binary alone.
func checkPlatformImage(t *testing.T, files map[string][]byte, m descriptor, binary []byte) {
	t.Helper()
	arch := m.Platform.Architecture
	var man manifest
	unmarshal(t, "manifest", blob(t, files, m), &man)
	if man.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.MediaType != man.MediaType {
		t.Errorf("manifest media type %q (descriptor %q)", man.MediaType, m.MediaType)
	}
	if man.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("config media type %q", man.Config.MediaType)
	}
	var cfg configFile
	unmarshal(t, "config", blob(t, files, man.Config), &cfg)
	wantTime, _ := time.Parse(time.RFC3339, created)
	checkImageConfig(t, cfg, arch, wantTime)
	checkLayer(t, files, man, cfg, arch, binary, wantTime)
}

// checkImageConfig checks the config's platform, that it sets only the
// entrypoint and user, and that it dates from wantTime.
func checkImageConfig(t *testing.T, cfg configFile, arch string, wantTime time.Time) {
	t.Helper()
	if cfg.OS != "linux" || cfg.Architecture != arch {
		t.Errorf("config platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	var keys []string
	for k := range cfg.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, []string{"Entrypoint", "User"}) {
		t.Errorf("config.config has %v, want only Entrypoint and User (no Cmd, no Env)", keys)
	}
	if got := string(cfg.Config["User"]); got != `"65532:65532"` {
		t.Errorf("User = %s", got)
	}
	if got := string(cfg.Config["Entrypoint"]); got != `["/handroll"]` {
		t.Errorf("Entrypoint = %s", got)
	}
	if !cfg.Created.Equal(wantTime) {
		t.Errorf("created = %s, want %s", cfg.Created, wantTime)
	}
	for _, h := range cfg.History {
		if !h.Created.Equal(wantTime) {
			t.Errorf("history created = %s, want %s", h.Created, wantTime)
		}
	}
}

// checkLayer checks that man has one layer, the one cfg's rootfs names,
// holding /handroll alone: the linux/arch binary, owned by root, dated
// wantTime.
func checkLayer(t *testing.T, files map[string][]byte, man manifest, cfg configFile, arch string, binary []byte, wantTime time.Time) {
	t.Helper()
	if len(man.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(man.Layers))
	}
	layer := man.Layers[0]
	if layer.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("layer media type %q", layer.MediaType)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, layer)))
	if err != nil {
		t.Fatal(err)
	}
	uncompressed, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha(uncompressed); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != got {
		t.Errorf("rootfs diff_ids %v, the layer's is %s", cfg.RootFS.DiffIDs, got)
	}
	tr := tar.NewReader(bytes.NewReader(uncompressed))
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name != "handroll" {
			continue
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(wantTime) {
			t.Errorf("handroll: type %c mode %o owner %d:%d mtime %s, want a regular file 0755 0:0 %s",
				hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime.UTC(), wantTime)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, binary) {
			t.Errorf("/handroll holds %d bytes that are not the linux/%s binary's %d", len(data), arch, len(binary))
		}
	}
	if !slices.Equal(names, []string{"handroll"}) {
		t.Errorf("layer holds %v, want exactly [handroll]", names)
	}
}

// readArchive returns the archive's files by name, and checks its entries
// are sorted and carry fixed owners and times.
func readArchive(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.ModTime.UTC().Format(time.RFC3339) != created {
			t.Errorf("%s: owner %d:%d, mtime %s; want 0:0 and %s", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime.UTC(), created)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
		if hex, ok := strings.CutPrefix(hdr.Name, "blobs/sha256/"); ok && sha(data) != "sha256:"+hex {
			t.Errorf("%s hashes to %s", hdr.Name, sha(data))
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("archive entries not sorted: %v", names)
	}
	return files
}

// blob returns the blob d points at, checking its size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("no blob %s in the archive", d.Digest)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s: %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

func unmarshal(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, data)
	}
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// standIn is a fixed file: a header line, then 384 KiB of pseudo-random
// bytes from seed.
func standIn(seed uint64, header string) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	data := []byte(header)
	for range 384 << 10 {
		data = append(data, byte(r.Uint32()))
	}
	return data
}

// repoRoot walks up from the working directory to the main module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/handroll/handroll\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no handroll checkout above the working directory")
		}
		dir = parent
	}
}
