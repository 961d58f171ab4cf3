package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// tableAccept asks the API server for a server-side Table, as kubectl get
// does; the server renders the CRD's additionalPrinterColumns.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// TestPrinterColumns checks `kubectl get webapps` output as the API server
// renders it: the column names and order, and the cells of a WebApp with a
// status and of one without.
func TestPrinterColumns(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)
	webapps := client.HandrollV1().WebApps(ns)
	ctx := testContext(t)

	ready := newWebApp("ready")
	ready.Spec.Replicas = ptr.To[int32](3)
	created, err := webapps.Create(ctx, ready, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ready: %v", err)
	}
	created.Status = sampleStatus("ready", 1, 3, 2)
	if _, err := webapps.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the status of ready: %v", err)
	}
	if _, err := webapps.Create(ctx, newWebApp("fresh"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating fresh: %v", err)
	}

	raw, err := client.HandrollV1().RESTClient().Get().
		Namespace(ns).Resource(handrollv1.WebAppResource).
		SetHeader("Accept", tableAccept).
		Do(ctx).Raw()
	if err != nil {
		t.Fatalf("listing webapps as a Table: %v", err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("decoding the Table: %v\n%s", err, raw)
	}
	if table.Kind != "Table" {
		t.Fatalf("got kind %q, want Table (was the Accept header ignored?)", table.Kind)
	}

	var columns []string
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	wantColumns := []string{"Name", "Ready", "Replicas", "Ready Replicas", "URL", "Age"}
	if !slices.Equal(columns, wantColumns) {
		t.Fatalf("columns = %q, want %q", columns, wantColumns)
	}

	// Cells are compared as printed: JSON numbers decode as float64, and a
	// missing value (no status yet) is nil, which kubectl shows as <none>.
	wantRows := map[string][]string{
		"ready": {"ready", "True", "3", "2", "http://ready.example.svc:80"},
		"fresh": {"fresh", "<nil>", "1", "<nil>", "<nil>"},
	}
	if len(table.Rows) != len(wantRows) {
		t.Fatalf("got %d rows, want %d: %s", len(table.Rows), len(wantRows), asJSON(table.Rows))
	}
	for _, row := range table.Rows {
		if len(row.Cells) != len(wantColumns) {
			t.Fatalf("row has %d cells, want %d: %s", len(row.Cells), len(wantColumns), asJSON(row.Cells))
		}
		var cells []string
		for _, c := range row.Cells[:len(row.Cells)-1] {
			cells = append(cells, fmt.Sprint(c))
		}
		want, ok := wantRows[cells[0]]
		if !ok {
			t.Fatalf("unexpected row %q", cells)
		}
		if !slices.Equal(cells, want) {
			t.Fatalf("row %s = %q, want %q", cells[0], cells, want)
		}
		// Age is relative to now; it must be there, as a string like "2s".
		if age, ok := row.Cells[len(row.Cells)-1].(string); !ok || age == "" {
			t.Fatalf("row %s: Age cell = %#v, want a duration string", cells[0], row.Cells[len(row.Cells)-1])
		}
	}
}

// TestDiscoveryNames checks what discovery advertises for webapps: the short
// name that `kubectl get wa` resolves, the category that puts WebApps in
// `kubectl get all`, and both subresources.
func TestDiscoveryNames(t *testing.T) {
	_ = env.Namespace(t) // skips under -short like the other tests
	client := handrollClient(t)

	list, err := client.Discovery().ServerResourcesForGroupVersion(handrollv1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatalf("discovering %s: %v", handrollv1.SchemeGroupVersion, err)
	}
	byName := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		byName[r.Name] = r
	}

	webapps, ok := byName[handrollv1.WebAppResource]
	if !ok {
		t.Fatalf("discovery of %s lists no %s: %s", handrollv1.SchemeGroupVersion, handrollv1.WebAppResource, asJSON(list.APIResources))
	}
	if !slices.Equal(webapps.ShortNames, []string{handrollv1.WebAppShortName}) {
		t.Fatalf("shortNames = %q, want [%q]", webapps.ShortNames, handrollv1.WebAppShortName)
	}
	if !slices.Equal(webapps.Categories, []string{"all"}) {
		t.Fatalf("categories = %q, want [all]", webapps.Categories)
	}
	if webapps.Kind != handrollv1.WebAppKind || webapps.SingularName != "webapp" || !webapps.Namespaced {
		t.Fatalf("kind %q, singular %q, namespaced %v; want WebApp, webapp, true", webapps.Kind, webapps.SingularName, webapps.Namespaced)
	}
	for _, sub := range []string{"webapps/status", "webapps/scale"} {
		if _, ok := byName[sub]; !ok {
			t.Fatalf("discovery lists no %s subresource", sub)
		}
	}
}
