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
	"github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
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
	if !v1.Served || !v1.Storage || v1.Deprecated {
		t.Errorf("v1 served=%v storage=%v deprecated=%v, want served, storage, not deprecated", v1.Served, v1.Storage, v1.Deprecated)
	}
	alpha := version(t, crd, "v1alpha1")
	if !alpha.Served || alpha.Storage {
		t.Errorf("v1alpha1 served=%v storage=%v, want served and not storage", alpha.Served, alpha.Storage)
	}
	if !alpha.Deprecated || alpha.DeprecationWarning == nil || !strings.Contains(*alpha.DeprecationWarning, "use handroll.dev/v1 ") {
		t.Errorf("v1alpha1 deprecated=%v warning %q, want deprecated with a warning to use handroll.dev/v1", alpha.Deprecated, deref(alpha.DeprecationWarning))
	}
	var storage []string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = append(storage, v.Name)
		}
	}
	if !slices.Equal(storage, []string{"v1"}) {
		t.Errorf("storage versions %v, want exactly [v1]", storage)
	}
	if len(crd.Spec.Versions) != 2 {
		t.Errorf("%d versions, want v1 and v1alpha1", len(crd.Spec.Versions))
	}

	for _, tc := range []struct {
		v            *apiextensionsv1.CustomResourceDefinitionVersion
		replicasPath string
	}{{v1, ".spec.replicas"}, {alpha, ".spec.size"}} {
		if tc.v.Subresources == nil || tc.v.Subresources.Status == nil {
			t.Errorf("%s has no status subresource", tc.v.Name)
			continue
		}
		wantScale := &apiextensionsv1.CustomResourceSubresourceScale{
			SpecReplicasPath: tc.replicasPath, StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptrTo(".status.selector"),
		}
		if diff := cmp.Diff(wantScale, tc.v.Subresources.Scale); diff != "" {
			t.Errorf("%s scale subresource (-want +got):\n%s", tc.v.Name, diff)
		}

		var columns []string
		for _, c := range tc.v.AdditionalPrinterColumns {
			columns = append(columns, c.Name+"="+c.JSONPath)
		}
		wantColumns := []string{
			`Ready=.status.conditions[?(@.type=="Ready")].status`,
			"Replicas=" + tc.replicasPath,
			"Ready Replicas=.status.readyReplicas",
			"URL=.status.url",
			"Age=.metadata.creationTimestamp",
		}
		if diff := cmp.Diff(wantColumns, columns); diff != "" {
			t.Errorf("%s printer columns (-want +got):\n%s", tc.v.Name, diff)
		}
	}
}

// TestCRDConversionWebhook: the API server converts between v1 and v1alpha1
// by calling handroll's webhook. controller-gen does not write this stanza;
// hack/update-codegen.sh adds it. Its namespace is a placeholder that
// kustomize replaces with the install's (test/manifests checks that).
func TestCRDConversionWebhook(t *testing.T) {
	conv := loadCRD(t).Spec.Conversion
	if conv == nil {
		t.Fatal("the CRD has no spec.conversion")
	}
	want := &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				Service: &apiextensionsv1.ServiceReference{
					Namespace: "system", Name: "handroll-webhook", Path: ptrTo("/convert"), Port: ptrTo[int32](443),
				},
			},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if diff := cmp.Diff(want, conv); diff != "" {
		t.Errorf("spec.conversion (-want +got):\n%s", diff)
	}
}

// crdVersion pairs a version of the CRD with its Go types.
type crdVersion struct {
	name      string
	spec      reflect.Type
	status    reflect.Type
	celRules  map[string]int // x-kubernetes-validations per schema node
	renamed   map[string]string
	onlyInHub []string
	defaulted func(spec []byte) (any, error) // decodes a spec, applies the Go defaulter
}

// versions are the CRD's versions. renamed maps each v1 spec field to its
// name in the version; onlyInHub are v1 spec fields the version lacks.
var versions = []crdVersion{{
	name:     "v1",
	spec:     reflect.TypeFor[handrollv1.WebAppSpec](),
	status:   reflect.TypeFor[handrollv1.WebAppStatus](),
	celRules: map[string]int{"(root)": 2, "spec.resources": 1, "spec.config": 1, "spec.service": 1},
	renamed: map[string]string{
		"image": "image", "replicas": "replicas", "port": "port", "env": "env",
		"resources": "resources", "config": "config", "configMapRef": "configMapRef", "service": "service",
	},
	defaulted: func(spec []byte) (any, error) {
		var w handrollv1.WebApp
		if err := json.Unmarshal(spec, &w.Spec); err != nil {
			return nil, err
		}
		handrollv1.SetObjectDefaults_WebApp(&w)
		return w.Spec, nil
	},
}, {
	name:     "v1alpha1",
	spec:     reflect.TypeFor[v1alpha1.WebAppSpec](),
	status:   reflect.TypeFor[v1alpha1.WebAppStatus](),
	celRules: map[string]int{"(root)": 1, "spec.resources": 1, "spec.configData": 1},
	renamed: map[string]string{
		"image": "image", "replicas": "size", "port": "containerPort", "env": "env",
		"resources": "resources", "config": "configData",
	},
	onlyInHub: []string{"configMapRef", "service"},
	defaulted: func(spec []byte) (any, error) {
		var w v1alpha1.WebApp
		if err := json.Unmarshal(spec, &w.Spec); err != nil {
			return nil, err
		}
		v1alpha1.SetObjectDefaults_WebApp(&w)
		return w.Spec, nil
	},
}}

// TestCRDSchemaCoversGoTypes walks every JSON field of the Go types, however
// deep, and finds it in the schema; then walks the schema and finds each
// property in the Go types. Neither can drift from the other.
func TestCRDSchemaCoversGoTypes(t *testing.T) {
	crd := loadCRD(t)
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			root := version(t, crd, v.name).Schema.OpenAPIV3Schema
			for _, top := range []struct {
				field string
				typ   reflect.Type
			}{{"spec", v.spec}, {"status", v.status}} {
				s, ok := root.Properties[top.field]
				if !ok {
					t.Fatalf("schema has no %s", top.field)
				}
				compareSchema(t, top.field, top.typ, &s, map[reflect.Type]bool{})
			}
			if !slices.Contains(root.Required, "spec") {
				t.Error("spec is not required at the top level")
			}
		})
	}
}

// TestCRDVersionsShareLimits: each spec field of an older version has the
// schema of its v1 field, rules and limits included, so an object valid in
// one version is valid in the other; and the status schemas are the same.
// Only descriptions and the messages of CEL rules (which name the field)
// may differ. Every v1 spec field is either in the version or listed as
// missing from it (and then carried by conversion in an annotation).
func TestCRDVersionsShareLimits(t *testing.T) {
	crd := loadCRD(t)
	hub := version(t, crd, "v1").Schema.OpenAPIV3Schema
	hubSpec := hub.Properties["spec"]
	for _, v := range versions[1:] {
		t.Run(v.name, func(t *testing.T) {
			root := version(t, crd, v.name).Schema.OpenAPIV3Schema
			spec := root.Properties["spec"]
			for hubName := range hubSpec.Properties {
				name, ok := v.renamed[hubName]
				if !ok {
					if !slices.Contains(v.onlyInHub, hubName) {
						t.Errorf("v1 spec.%s: neither in %s nor listed as missing from it", hubName, v.name)
					}
					continue
				}
				got, ok := spec.Properties[name]
				if !ok {
					t.Errorf("spec.%s: not in the %s schema", name, v.name)
					continue
				}
				if diff := cmp.Diff(withoutProse(hubSpec.Properties[hubName]), withoutProse(got)); diff != "" {
					t.Errorf("%s spec.%s differs from v1 spec.%s (-v1 +%s):\n%s", v.name, name, hubName, v.name, diff)
				}
			}
			var required []string
			for _, r := range hubSpec.Required {
				required = append(required, v.renamed[r])
			}
			if !slices.Equal(required, spec.Required) {
				t.Errorf("required spec fields %v, want %v", spec.Required, required)
			}
			if diff := cmp.Diff(withoutProse(hub.Properties["status"]), withoutProse(root.Properties["status"])); diff != "" {
				t.Errorf("status schema differs from v1's (-v1 +%s):\n%s", v.name, diff)
			}
		})
	}
}

// withoutProse returns s without its descriptions and CEL messages.
func withoutProse(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	s.Description = ""
	s.XValidations = slices.Clone(s.XValidations)
	for i := range s.XValidations {
		s.XValidations[i].Message = ""
	}
	if s.Properties != nil {
		props := make(map[string]apiextensionsv1.JSONSchemaProps, len(s.Properties))
		for k, p := range s.Properties {
			props[k] = withoutProse(p)
		}
		s.Properties = props
	}
	if s.Items != nil && s.Items.Schema != nil {
		items := withoutProse(*s.Items.Schema)
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		ap := withoutProse(*s.AdditionalProperties.Schema)
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: s.AdditionalProperties.Allows, Schema: &ap}
	}
	return s
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
// this test is what keeps them equal, in every version.
func TestCRDLimitsMatchGoConstants(t *testing.T) {
	crd := loadCRD(t)
	for _, tc := range []struct {
		version                     string
		names                       map[string]string
		minReplicas, maxReplicas    int32
		maxEnv, maxConfig, maxImage int64
	}{
		{"v1", versions[0].renamed, handrollv1.MinReplicas, handrollv1.MaxReplicas,
			handrollv1.MaxEnv, handrollv1.MaxConfigEntries, handrollv1.MaxImageLength},
		{"v1alpha1", versions[1].renamed, v1alpha1.MinSize, v1alpha1.MaxSize,
			v1alpha1.MaxEnv, v1alpha1.MaxConfigDataEntries, v1alpha1.MaxImageLength},
	} {
		t.Run(tc.version, func(t *testing.T) {
			spec := version(t, crd, tc.version).Schema.OpenAPIV3Schema.Properties["spec"]
			prop := func(path ...string) apiextensionsv1.JSONSchemaProps {
				t.Helper()
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
			n := tc.names
			checkRange(n["replicas"], prop(n["replicas"]), float64(tc.minReplicas), float64(tc.maxReplicas))
			checkRange(n["port"], prop(n["port"]), 1, 65535)

			if got := prop(n["env"]).MaxItems; got == nil || *got != tc.maxEnv {
				t.Errorf("env maxItems %v, want %d", deref(got), tc.maxEnv)
			}
			if got := prop(n["config"]).MaxProperties; got == nil || *got != tc.maxConfig {
				t.Errorf("%s maxProperties %v, want %d", n["config"], deref(got), tc.maxConfig)
			}
			if got := prop(n["image"]).MaxLength; got == nil || *got != tc.maxImage {
				t.Errorf("image maxLength %v, want %d", deref(got), tc.maxImage)
			}
			if !slices.Contains(spec.Required, "image") {
				t.Error("spec.image is not required")
			}
			if env := prop(n["env"]); env.XListType == nil || *env.XListType != "map" || !slices.Equal(env.XListMapKeys, []string{"name"}) {
				t.Error("env must be a list-map keyed by name, so that env names are unique and server-side apply merges by name")
			}
			if _, ok := n["service"]; !ok {
				return
			}
			checkRange("service.port", prop("service", "port"), 1, 65535)
			checkRange("service.nodePort", prop("service", "nodePort"), float64(handrollv1.MinNodePort), float64(handrollv1.MaxNodePort))
			var enum []string
			for _, e := range prop("service", "type").Enum {
				enum = append(enum, strings.Trim(string(e.Raw), `"`))
			}
			sort.Strings(enum)
			if want := []string{string(handrollv1.ServiceTypeClusterIP), string(handrollv1.ServiceTypeNodePort)}; !slices.Equal(enum, want) {
				t.Errorf("service.type enum %v, want %v", enum, want)
			}
		})
	}
}

// TestCRDDefaultsMatchGoDefaults applies each version's structural defaults
// the way the API server does and compares the result with the Go
// defaulter, for objects that leave different fields unset.
func TestCRDDefaultsMatchGoDefaults(t *testing.T) {
	crd := loadCRD(t)
	specs := map[string][]string{
		"v1": {
			`{"image":"nginx"}`,
			`{"image":"nginx","replicas":0}`,
			`{"image":"nginx","service":{}}`,
			`{"image":"nginx","service":{"type":"NodePort"}}`,
			`{"image":"nginx","port":9000,"service":{"port":8443}}`,
		},
		"v1alpha1": {
			`{"image":"nginx"}`,
			`{"image":"nginx","size":0}`,
			`{"image":"nginx","size":3,"containerPort":9000}`,
			`{"image":"nginx","configData":{}}`,
		},
	}
	for _, v := range versions {
		props := version(t, crd, v.name).Schema.OpenAPIV3Schema
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
			t.Fatal(err)
		}
		structural, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatalf("the %s schema is not structural: %v", v.name, err)
		}
		if len(specs[v.name]) == 0 {
			t.Fatalf("no objects to default in %s", v.name)
		}
		for _, specJSON := range specs[v.name] {
			t.Run(v.name+"/"+specJSON, func(t *testing.T) {
				var u map[string]any
				if err := json.Unmarshal([]byte(`{"apiVersion":"handroll.dev/`+v.name+`","kind":"WebApp","metadata":{"name":"a"},"spec":`+specJSON+`}`), &u); err != nil {
					t.Fatal(err)
				}
				defaulting.Default(u, structural)
				specBySchema, err := json.Marshal(u["spec"])
				if err != nil {
					t.Fatal(err)
				}
				bySchema, err := decodeSpec(v, specBySchema)
				if err != nil {
					t.Fatal(err)
				}
				byGo, err := v.defaulted([]byte(specJSON))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(byGo, bySchema); diff != "" {
					t.Errorf("Go defaults and CRD defaults differ (-go +crd):\n%s", diff)
				}
			})
		}
	}
}

// decodeSpec decodes a spec of version v without defaulting it.
func decodeSpec(v crdVersion, data []byte) (any, error) {
	spec := reflect.New(v.spec)
	if err := json.Unmarshal(data, spec.Interface()); err != nil {
		return nil, err
	}
	return spec.Elem().Interface(), nil
}

func TestCRDCarriesTheCELRules(t *testing.T) {
	crd := loadCRD(t)
	for _, v := range versions {
		root := version(t, crd, v.name).Schema.OpenAPIV3Schema
		spec := root.Properties["spec"]
		got := map[string]int{"(root)": len(root.XValidations)}
		for name, p := range spec.Properties {
			if n := len(p.XValidations); n > 0 {
				got["spec."+name] = n
			}
		}
		if diff := cmp.Diff(v.celRules, got); diff != "" {
			t.Errorf("%s: x-kubernetes-validations per schema node (-want +got):\n%s", v.name, diff)
		}
		for _, r := range root.XValidations {
			if r.Message == "" {
				t.Errorf("%s: rule %q has no message: users would see the raw CEL", v.name, r.Rule)
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}
