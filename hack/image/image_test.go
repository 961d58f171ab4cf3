package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseBinary(t *testing.T) {
	for _, tc := range []struct {
		in, platform, path string
	}{
		{"linux/amd64=bin/handroll-linux-amd64", "linux/amd64", "bin/handroll-linux-amd64"},
		{"linux/arm64/v8=/tmp/x=y", "linux/arm64/v8", "/tmp/x=y"},
	} {
		b, err := ParseBinary(tc.in)
		if err != nil || b.Platform.String() != tc.platform || b.Path != tc.path {
			t.Errorf("ParseBinary(%q) = %s %q, %v; want %s %q", tc.in, b.Platform.String(), b.Path, err, tc.platform, tc.path)
		}
	}
	for _, in := range []string{"", "linux/amd64", "linux/amd64=", "=bin/x", "linux=bin/x", "linux/amd64:10.0=bin/x", "a/b/c/d=bin/x"} {
		if _, err := ParseBinary(in); err == nil {
			t.Errorf("ParseBinary(%q) accepted", in)
		}
	}
}

func TestCreatedTime(t *testing.T) {
	for _, tc := range []struct {
		created, epoch string
		want           time.Time
	}{
		{"", "", time.Unix(0, 0)},
		{"", "1700000000", time.Unix(1700000000, 0)},
		{"2023-11-14T23:13:20.5+01:00", "5", time.Unix(1700000000, 0)},
	} {
		got, err := CreatedTime(tc.created, tc.epoch)
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("CreatedTime(%q, %q) = %v, %v; want %v UTC", tc.created, tc.epoch, got, err, tc.want.UTC())
		}
	}
	for _, tc := range [][2]string{{"yesterday", ""}, {"", "-1"}, {"", "1.5"}} {
		if _, err := CreatedTime(tc[0], tc[1]); err == nil {
			t.Errorf("CreatedTime(%q, %q) accepted", tc[0], tc[1])
		}
	}
}

func TestParseTag(t *testing.T) {
	for in, want := range map[string]string{
		"localhost/handroll:dev":                "dev",
		"localhost/handroll-pause:1":            "1",
		"localhost:5000/team/handroll:v1.2.3":   "v1.2.3",
		"registry.example.com/handroll:release": "release",
	} {
		full, tag, err := ParseTag(in)
		if err != nil || full != in || tag != want {
			t.Errorf("ParseTag(%q) = %q %q, %v; want %q %q", in, full, tag, err, in, want)
		}
	}
	for _, in := range []string{"handroll:dev", "team/handroll:dev", "localhost/handroll", "localhost/Handroll:dev", "localhost/handroll@sha256:" + string(bytes.Repeat([]byte("0"), 64))} {
		if _, _, err := ParseTag(in); err == nil {
			t.Errorf("ParseTag(%q) accepted", in)
		}
	}
}

func TestLayerTar(t *testing.T) {
	mtime := time.Unix(1700000000, 0).UTC()
	data, err := LayerTar("handroll", []byte("binary"), mtime)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "handroll" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 ||
		hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(mtime) {
		t.Errorf("header %+v", hdr)
	}
	if body, _ := io.ReadAll(tr); string(body) != "binary" {
		t.Errorf("body %q", body)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("a second entry: %v", err)
	}
}

// TestDeterministic builds the same index twice, the binaries given in
// either order, and compares the archives byte for byte.
func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	var bins []Binary
	for _, p := range []string{"linux/arm64", "linux/amd64"} {
		path := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(path, bytes.Repeat([]byte(p), 4096), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := ParseBinary(p + "=" + path)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, b)
	}
	at := time.Unix(1700000000, 0).UTC()
	annotations := map[string]string{AnnotationContainerdName: "localhost/x:1", AnnotationRefName: "1"}
	archive := func(bs []Binary) ([]byte, string) {
		idx, err := Index(bs, "x", at, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteArchive(&buf, idx, annotations, at); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), d.String()
	}
	a, da := archive(bins)
	b, db := archive([]Binary{bins[1], bins[0]})
	if da != db || !bytes.Equal(a, b) {
		t.Errorf("two builds differ: %s (%d bytes) and %s (%d bytes)", da, len(a), db, len(b))
	}

	if _, err := Index(append(bins, bins[0]), "x", at, nil); err == nil {
		t.Error("a platform given twice was accepted")
	}
	if _, err := Index(nil, "x", at, nil); err == nil {
		t.Error("no binary was accepted")
	}
}
