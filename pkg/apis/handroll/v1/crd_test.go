package v1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

const crdFile = "../../../../manifests/crd/handroll.dev_webapps.yaml"

func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(crdFile))
	if err != nil {
		t.Fatalf("reading the generated CRD (run make generate): %v", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("the generated CRD does not decode into apiextensions.k8s.io/v1: %v", err)
	}
	return &crd
}

func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	t.Fatalf("the CRD has no version %s", name)
	return nil
}

func TestCRDNamesVersionsAndSubresources(t *testing.T) {
	crd := loadCRD(t)
	if crd.Name != "webapps.handroll.dev" || crd.Spec.Group != handrollv1.GroupName {
		t.Errorf("name %q, group %q", crd.Name, crd.Spec.Group)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope %q, want Namespaced", crd.Spec.Scope)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Plural: handrollv1.WebAppResource, Singular: "webapp", Kind: handrollv1.WebAppKind, ListKind: handrollv1.WebAppListKind,
		ShortNames: []string{handrollv1.WebAppShortName}, Categories: []string{"all"},
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}

	v1 := version(t, crd, "v1")
	if !v1.Served || !v1.Storage {
		t.Errorf("v1 served=%v storage=%v, want both", v1.Served, v1.Storage)
	}
	storage := 0
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage++
		}
	}
	if storage != 1 {
		t.Errorf("%d storage versions, want exactly 1", storage)
	}

	if v1.Subresources == nil || v1.Subresources.Status == nil {
		t.Fatal("v1 has no status subresource")
	}
	wantScale := &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptrTo(".status.selector"),
	}
	if diff := cmp.Diff(wantScale, v1.Subresources.Scale); diff != "" {
		t.Errorf("scale subresource (-want +got):\n%s", diff)
	}

	var columns []string
	for _, c := range v1.AdditionalPrinterColumns {
		columns = append(columns, c.Name+"="+c.JSONPath)
	}
	wantColumns := []string{
		`Ready=.status.conditions[?(@.type=="Ready")].status`,
		"Replicas=.spec.replicas",
		"Ready Replicas=.status.readyReplicas",
		"URL=.status.url",
		"Age=.metadata.creationTimestamp",
	}
	if diff := cmp.Diff(wantColumns, columns); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
}

// TestCRDSchemaCoversGoTypes walks every JSON field of the Go types, however
// deep, and finds it in the schema; then walks the schema and finds each
// property in the Go types. Neither can drift from the other.
func TestCRDSchemaCoversGoTypes(t *testing.T) {
	root := version(t, loadCRD(t), "v1").Schema.OpenAPIV3Schema
	for _, top := range []struct {
		field string
		typ   reflect.Type
	}{
		{"spec", reflect.TypeFor[handrollv1.WebAppSpec]()},
		{"status", reflect.TypeFor[handrollv1.WebAppStatus]()},
	} {
		s, ok := root.Properties[top.field]
		if !ok {
			t.Fatalf("schema has no %s", top.field)
		}
		compareSchema(t, top.field, top.typ, &s, map[reflect.Type]bool{})
	}
	if !slices.Contains(root.Required, "spec") {
		t.Error("spec is not required at the top level")
	}
}

// opaque types have a hand-written OpenAPI schema (a string, or int-or-string)
// rather than their Go fields.
var opaque = map[reflect.Type]bool{
	reflect.TypeFor[resource.Quantity]():    true,
	reflect.TypeFor[metav1.Time]():          true,
	reflect.TypeFor[intstr.IntOrString]():   true,
	reflect.TypeFor[metav1.Duration]():      true,
	reflect.TypeFor[runtime.RawExtension](): true,
}

func compareSchema(t *testing.T, path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps, seen map[reflect.Type]bool) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if opaque[typ] {
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if s.Type != "object" {
			t.Errorf("%s: Go struct %s, schema type %q", path, typ, s.Type)
			return
		}
		if seen[typ] {
			return // recursive types: the first visit covered it
		}
		seen[typ] = true
		defer delete(seen, typ)

		goFields := map[string]reflect.Type{}
		collectJSONFields(typ, goFields)
		for name, ft := range goFields {
			ps, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s: in the Go type, missing from the CRD schema", path, name)
				continue
			}
			compareSchema(t, path+"."+name, ft, &ps, seen)
		}
		for name := range s.Properties {
			if _, ok := goFields[name]; !ok {
				t.Errorf("%s.%s: in the CRD schema, missing from the Go type %s", path, name, typ)
			}
		}
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			return // []byte is a base64 string
		}
		if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
			t.Errorf("%s: Go slice, schema type %q", path, s.Type)
			return
		}
		compareSchema(t, path+"[]", typ.Elem(), s.Items.Schema, seen)
	case reflect.Map:
		if s.Type != "object" || s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			t.Errorf("%s: Go map, schema type %q without additionalProperties", path, s.Type)
			return
		}
		compareSchema(t, path+"{}", typ.Elem(), s.AdditionalProperties.Schema, seen)
	case reflect.String:
		if s.Type != "string" {
			t.Errorf("%s: Go string, schema type %q", path, s.Type)
		}
	case reflect.Bool:
		if s.Type != "boolean" {
			t.Errorf("%s: Go bool, schema type %q", path, s.Type)
		}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
		if s.Type != "integer" {
			t.Errorf("%s: Go %s, schema type %q", path, typ.Kind(), s.Type)
		}
	}
}

// collectJSONFields records the JSON name and type of every field that
// encoding/json would write for typ, following inlined embedded structs.
func collectJSONFields(typ reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			collectJSONFields(f.Type, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// TestCRDLimitsMatchGoConstants: markers repeat the Go constants as literals;
// this test is what keeps them equal.
func TestCRDLimitsMatchGoConstants(t *testing.T) {
	spec := version(t, loadCRD(t), "v1").Schema.OpenAPIV3Schema.Properties["spec"]
	prop := func(path ...string) apiextensionsv1.JSONSchemaProps {
		s := spec
		for _, p := range path {
			var ok bool
			if s, ok = s.Properties[p]; !ok {
				t.Fatalf("spec.%s: not in the schema", strings.Join(path, "."))
			}
		}
		return s
	}
	checkRange := func(name string, s apiextensionsv1.JSONSchemaProps, minimum, maximum float64) {
		t.Helper()
		if s.Minimum == nil || *s.Minimum != minimum || s.Maximum == nil || *s.Maximum != maximum {
			t.Errorf("%s: schema range [%v, %v], want [%v, %v]", name, deref(s.Minimum), deref(s.Maximum), minimum, maximum)
		}
	}
	checkRange("replicas", prop("replicas"), float64(handrollv1.MinReplicas), float64(handrollv1.MaxReplicas))
	checkRange("port", prop("port"), 1, 65535)
	checkRange("service.port", prop("service", "port"), 1, 65535)
	checkRange("service.nodePort", prop("service", "nodePort"), float64(handrollv1.MinNodePort), float64(handrollv1.MaxNodePort))

	if got := prop("env").MaxItems; got == nil || *got != handrollv1.MaxEnv {
		t.Errorf("env maxItems %v, want %d", got, handrollv1.MaxEnv)
	}
	if got := prop("config").MaxProperties; got == nil || *got != handrollv1.MaxConfigEntries {
		t.Errorf("config maxProperties %v, want %d", got, handrollv1.MaxConfigEntries)
	}
	if got := prop("image").MaxLength; got == nil || *got != handrollv1.MaxImageLength {
		t.Errorf("image maxLength %v, want %d", got, handrollv1.MaxImageLength)
	}
	if !slices.Contains(spec.Required, "image") {
		t.Error("spec.image is not required")
	}
	var enum []string
	for _, e := range prop("service", "type").Enum {
		enum = append(enum, strings.Trim(string(e.Raw), `"`))
	}
	sort.Strings(enum)
	if want := []string{string(handrollv1.ServiceTypeClusterIP), string(handrollv1.ServiceTypeNodePort)}; !slices.Equal(enum, want) {
		t.Errorf("service.type enum %v, want %v", enum, want)
	}
	if env := prop("env"); env.XListType == nil || *env.XListType != "map" || !slices.Equal(env.XListMapKeys, []string{"name"}) {
		t.Error("env must be a list-map keyed by name, so that env names are unique and server-side apply merges by name")
	}
}

// TestCRDDefaultsMatchGoDefaults applies the CRD's structural defaults the way
// the API server does and compares the result with the Go defaulter, for
// objects that leave different fields unset.
func TestCRDDefaultsMatchGoDefaults(t *testing.T) {
	props := version(t, loadCRD(t), "v1").Schema.OpenAPIV3Schema
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("the schema is not structural: %v", err)
	}

	for _, specJSON := range []string{
		`{"image":"nginx"}`,
		`{"image":"nginx","replicas":0}`,
		`{"image":"nginx","service":{}}`,
		`{"image":"nginx","service":{"type":"NodePort"}}`,
		`{"image":"nginx","port":9000,"service":{"port":8443}}`,
	} {
		t.Run(specJSON, func(t *testing.T) {
			var u map[string]any
			if err := json.Unmarshal([]byte(`{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"a"},"spec":`+specJSON+`}`), &u); err != nil {
				t.Fatal(err)
			}
			defaulting.Default(u, structural)
			var bySchema handrollv1.WebApp
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &bySchema); err != nil {
				t.Fatal(err)
			}

			var byGo handrollv1.WebApp
			if err := json.Unmarshal([]byte(`{"metadata":{"name":"a"},"spec":`+specJSON+`}`), &byGo); err != nil {
				t.Fatal(err)
			}
			handrollv1.SetObjectDefaults_WebApp(&byGo)
			if diff := cmp.Diff(byGo.Spec, bySchema.Spec); diff != "" {
				t.Errorf("Go defaults and CRD defaults differ (-go +crd):\n%s", diff)
			}
		})
	}
}

func TestCRDCarriesTheCELRules(t *testing.T) {
	root := version(t, loadCRD(t), "v1").Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	count := func(s apiextensionsv1.JSONSchemaProps) int { return len(s.XValidations) }
	cases := map[string]int{
		"(root)":         count(*root),
		"spec.resources": count(spec.Properties["resources"]),
		"spec.config":    count(spec.Properties["config"]),
		"spec.service":   count(spec.Properties["service"]),
	}
	want := map[string]int{"(root)": 2, "spec.resources": 1, "spec.config": 1, "spec.service": 1}
	if diff := cmp.Diff(want, cases); diff != "" {
		t.Errorf("x-kubernetes-validations per schema node (-want +got):\n%s", diff)
	}
	for _, r := range root.XValidations {
		if r.Message == "" {
			t.Errorf("rule %q has no message: users would see the raw CEL", r.Rule)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func deref(f *float64) any {
	if f == nil {
		return "unset"
	}
	return *f
}
