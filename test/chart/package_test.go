package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// makeChartPackage runs make chart-package into a new directory and
// returns the archive's bytes.
func makeChartPackage(t *testing.T, vars ...string) []byte {
	t.Helper()
	out := t.TempDir()
	argv := append([]string{"--no-print-directory", "chart-package", "HELM=" + helmPath(t), "CHART_OUT=" + out}, vars...)
	if _, err := run(t, nil, "make", argv...); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "handroll-" + chartVersion + ".tgz"
	if len(entries) != 1 || entries[0].Name() != want {
		t.Fatalf("make chart-package wrote %v; want %s alone", entries, want)
	}
	data, err := os.ReadFile(filepath.Join(out, want))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// untar returns the archive's files by name, failing t on a timestamp
// other than epoch.
func untar(t *testing.T, tgz []byte, epoch time.Time) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() {
		t.Errorf("the gzip header holds a time, %v", zr.ModTime)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: modified at %v, want SOURCE_DATE_EPOCH %v", h.Name, h.ModTime, epoch)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	}
}

// TestChartPackage checks that make chart-package writes the same bytes
// twice, a second apart, with every timestamp SOURCE_DATE_EPOCH; that the
// package is the chart (version, CRD, the same rendering); and that
// CHART_IMG becomes its default image.
func TestChartPackage(t *testing.T) {
	const epoch = 1700000000
	first := makeChartPackage(t, "SOURCE_DATE_EPOCH=1700000000")
	time.Sleep(1100 * time.Millisecond)
	if second := makeChartPackage(t, "SOURCE_DATE_EPOCH=1700000000"); !bytes.Equal(first, second) {
		t.Error("make chart-package wrote different bytes twice from the same tree")
	}
	files := untar(t, first, time.Unix(epoch, 0))
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["handroll/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != chartVersion || meta.AppVersion != appVersion {
		t.Errorf("packaged Chart.yaml: version %q appVersion %q, want %s and %s", meta.Version, meta.AppVersion, chartVersion, appVersion)
	}
	for _, f := range []string{"handroll/values.yaml", "handroll/values.schema.json", "handroll/files/handroll.dev_webapps.yaml", "handroll/templates/deployment.yaml"} {
		if _, ok := files[f]; !ok {
			t.Errorf("the package lacks %s", f)
		}
	}

	// The package renders as the chart's directory does.
	tgz := filepath.Join(t.TempDir(), "handroll.tgz")
	if err := os.WriteFile(tgz, first, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, nil, helmPath(t), "template", "handroll", tgz, "--namespace", defaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, parse(t, out, "the package"), mustTemplate(t, defaultNamespace), "the package", "charts/handroll")

	t.Run("CHART_IMG", func(t *testing.T) {
		img := "registry.invalid:5000/team/handroll@sha256:" + strings.Repeat("cd", 32)
		files := untar(t, makeChartPackage(t, "SOURCE_DATE_EPOCH=1700000000", "CHART_IMG="+img), time.Unix(epoch, 0))
		var values struct {
			Manager struct {
				Image struct{ Repository, Tag, Digest string } `json:"image"`
			} `json:"manager"`
		}
		if err := yaml.Unmarshal(files["handroll/values.yaml"], &values); err != nil {
			t.Fatal(err)
		}
		got := values.Manager.Image
		if got.Repository != "registry.invalid:5000/team/handroll" || got.Digest != "sha256:"+strings.Repeat("cd", 32) || got.Tag != "" {
			t.Errorf("CHART_IMG=%s: the packaged values hold image %+v", img, got)
		}
		if _, err := run(t, nil, "make", "--no-print-directory", "chart-package", "HELM="+helmPath(t), "CHART_OUT="+t.TempDir(), "CHART_IMG=x@sha256:short"); err == nil ||
			!strings.Contains(err.Error(), "64 hex digits") {
			t.Errorf("CHART_IMG with a bad digest: %v; want it refused", err)
		}
	})
}
