package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/pkg/server"
)

// newTestServer serves both webhooks as cmd/handroll would, minus TLS (the
// server package tests TLS).
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := server.NewWebhookMux()
	Register(mux, s)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func webAppRequest(op admissionv1.Operation, object string) *admissionv1.AdmissionRequest {
	var raw []byte // "" leaves the object out, as for a DELETE
	if object != "" {
		raw = []byte(object)
	}
	return &admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprintf("uid-%d", rand.Int63())),
		Kind:      webAppKind,
		Resource:  webAppResource,
		Name:      "shop",
		Namespace: "default",
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
	}
}

func postRaw(t *testing.T, url string, body io.Reader) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// review sends req to path and returns the response, checking the envelope.
func review(t *testing.T, srv *httptest.Server, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatal(err)
	}
	code, out := postRaw(t, srv.URL+path, bytes.NewReader(body))
	if code != http.StatusOK {
		t.Fatalf("POST %s = %d: %s", path, code, out)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &ar); err != nil || ar.Response == nil {
		t.Fatalf("response is not an AdmissionReview with a response (%v): %s", err, out)
	}
	if ar.Response.UID != req.UID {
		t.Errorf("response UID %q, want the request's %q", ar.Response.UID, req.UID)
	}
	return ar.Response
}

func decodeWebApp(t *testing.T, raw []byte) *handrollv1.WebApp {
	t.Helper()
	var w handrollv1.WebApp
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return &w
}

const minimalWebApp = `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop","namespace":"default"},"spec":{"image":"nginx:1.27"}}`

func TestDefaulterPatchAppliesDefaults(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name   string
		object string
		// what the patched object must still contain, verbatim: the patch
		// must not rewrite what defaulting did not change.
		keep []string
		// paths no operation may touch
		untouched []string
	}{
		{name: "minimal", object: minimalWebApp, untouched: []string{"/metadata/creationTimestamp", "/status"}},
		{name: "no spec at all", object: `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop"}}`},
		{name: "null service", object: `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop"},"spec":{"image":"nginx:1.27","service":null}}`},
		{
			name:      "half a service and replicas set",
			object:    `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop"},"spec":{"image":"nginx:1.27","replicas":3,"service":{"type":"NodePort"}}}`,
			keep:      []string{`"replicas":3`, `"type":"NodePort"`},
			untouched: []string{"/spec/replicas", "/spec/service/type"},
		},
		{
			name:   "explicit zero replicas stay zero",
			object: `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop"},"spec":{"image":"nginx:1.27","replicas":0}}`,
			keep:   []string{`"replicas":0`}, untouched: []string{"/spec/replicas"},
		},
		{
			name:   "env from a file key",
			object: `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop"},"spec":{"image":"nginx:1.27","env":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"fileKeyRef":{"volumeName":"v","path":"p","key":"k"}}}]}}`,
			keep:   []string{`"name":"A","value":"1"`},
		},
		{
			name:      "encoding differences are left alone",
			object:    `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop","annotations":{"example.com/team":"a"},"creationTimestamp":null},"spec":{"image":"nginx:1.27","futureField":{"x":1},"resources":{"requests":{"cpu":"0.1"}}},"status":{}}`,
			keep:      []string{`"futureField":{"x":1}`, `"cpu":"0.1"`, `"example.com/team":"a"`},
			untouched: []string{"/spec/futureField", "/spec/resources/requests/cpu", "/metadata/creationTimestamp"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, srv, DefaulterPath, webAppRequest(admissionv1.Create, tc.object))
			if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response = allowed %v, patch type %v, result %v; want allowed with a JSONPatch", resp.Allowed, resp.PatchType, resp.Result)
			}
			var ops []map[string]any
			if err := json.Unmarshal(resp.Patch, &ops); err != nil {
				t.Fatalf("patch %s: %v", resp.Patch, err)
			}
			for _, op := range ops {
				for _, p := range tc.untouched {
					if path, _ := op["path"].(string); path == p || strings.HasPrefix(path, p+"/") {
						t.Errorf("patch touches %s: %v", p, op)
					}
				}
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("decoding patch %s: %v", resp.Patch, err)
			}
			patched, err := p.Apply([]byte(tc.object))
			if err != nil {
				t.Fatalf("applying patch %s: %v", resp.Patch, err)
			}
			want := decodeWebApp(t, []byte(tc.object))
			handrollv1.SetObjectDefaults_WebApp(want)
			if got := decodeWebApp(t, patched); !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("patched object differs from SetObjectDefaults_WebApp's\n got %+v\nwant %+v\npatch %s", got.Spec, want.Spec, resp.Patch)
			}
			for _, k := range tc.keep {
				if !bytes.Contains(patched, []byte(k)) {
					t.Errorf("patched object lost %s:\n%s", k, patched)
				}
			}

			// Defaulting is idempotent: the patched object needs no patch.
			again := review(t, srv, DefaulterPath, webAppRequest(admissionv1.Update, string(patched)))
			if !again.Allowed || len(again.Patch) != 0 || again.PatchType != nil {
				t.Errorf("defaulting the defaulted object gave patch %s", again.Patch)
			}
		})
	}
}

// validSpec has everything that would draw a warning set right.
const validSpec = `"image":"example.com/shop:v1","replicas":2,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}`

func webApp(spec string) string {
	return `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"shop","namespace":"default"},"spec":{` + spec + `}}`
}

func TestValidatorDeniesWithFieldPaths(t *testing.T) {
	srv := newTestServer(t)
	obj := webApp(`"image":"Nginx::1","replicas":99,"env":[{"name":"HANDROLL_X","value":"1"},{"name":"OK","value":"a"},{"name":"OK","value":"b"}],` +
		`"service":{"type":"ClusterIP","nodePort":30001},"configMapRef":{"name":"shop-config"}`)
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
		resp := review(t, srv, ValidatorPath, webAppRequest(op, obj))
		if resp.Allowed || resp.Result == nil {
			t.Fatalf("%s of an invalid WebApp allowed: %+v", op, resp)
		}
		if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
			t.Errorf("%s: code %d reason %q, want 422 Invalid as the API server answers", op, resp.Result.Code, resp.Result.Reason)
		}
		if !strings.HasPrefix(resp.Result.Message, `WebApp.handroll.dev "shop" is invalid: `) {
			t.Errorf("%s: message %q", op, resp.Result.Message)
		}
		paths := []string{"spec.image", "spec.replicas", "spec.env[0].name", "spec.env[2].name", "spec.service.nodePort", "spec.configMapRef.name"}
		var causes []string
		if resp.Result.Details != nil {
			for _, c := range resp.Result.Details.Causes {
				causes = append(causes, c.Field)
			}
		}
		for _, p := range paths {
			if !strings.Contains(resp.Result.Message, p+":") {
				t.Errorf("%s: message does not name %s: %s", op, p, resp.Result.Message)
			}
			if !slices.Contains(causes, p) {
				t.Errorf("%s: status.details.causes %v lack %s", op, causes, p)
			}
		}
		if len(causes) != len(paths) {
			t.Errorf("%s: %d causes %v, want exactly %v", op, len(causes), causes, paths)
		}
	}

	// A valid object is allowed, without warnings.
	resp := review(t, srv, ValidatorPath, webAppRequest(admissionv1.Create, webApp(validSpec)))
	if !resp.Allowed || len(resp.Warnings) != 0 {
		t.Errorf("valid WebApp: allowed %v, warnings %q, result %v", resp.Allowed, resp.Warnings, resp.Result)
	}
}

func TestValidatorWarnings(t *testing.T) {
	srv := newTestServer(t)
	const req = `"resources":{"requests":{"cpu":"100m"}}`
	cases := []struct {
		name, spec string
		want       []string // substrings, one per expected warning
	}{
		{"clean", validSpec, nil},
		{"no tag", `"image":"nginx",` + req, []string{`spec.image: "nginx" has no tag`}},
		{"no tag with a registry port", `"image":"registry.local:5000/team/app",` + req, []string{"has no tag"}},
		{"latest", `"image":"example.com/app:latest",` + req, []string{"uses the tag latest"}},
		{"latest pinned by digest", `"image":"app:latest@sha256:` + strings.Repeat("a", 64) + `",` + req, nil},
		{"no requests", `"image":"app:v1"`, []string{"spec.resources: no requests"}},
		{"limits only (requests default to them)", `"image":"app:v1","resources":{"limits":{"cpu":"1"}}`, nil},
		{"scaled to zero", `"image":"app:v1","replicas":0,` + req, []string{"spec.replicas: 0"}},
		{
			"secret-looking env",
			`"image":"app:v1",` + req + `,"env":[{"name":"DB_PASSWORD","value":"hunter2"},{"name":"MODE","value":"x"},{"name":"api_token","value":"t"},` +
				`{"name":"CLIENT_SECRET","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}},{"name":"GITHUB_TOKEN","value":""}]`,
			[]string{"spec.env[0].value: DB_PASSWORD looks like a secret", "spec.env[2].value: api_token looks like a secret"},
		},
		{"everything", `"image":"nginx","replicas":0,"env":[{"name":"SECRET","value":"x"}]`, []string{"no tag", "spec.replicas: 0", "no requests", "spec.env[0].value: SECRET"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, srv, ValidatorPath, webAppRequest(admissionv1.Create, webApp(tc.spec)))
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			if len(resp.Warnings) != len(tc.want) {
				t.Errorf("warnings %q, want %d containing %q", resp.Warnings, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if i < len(resp.Warnings) && !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, resp.Warnings[i], w)
				}
			}
			for _, w := range resp.Warnings {
				if len(w) > 256 || strings.Contains(w, "hunter2") {
					t.Errorf("warning too long or leaks a value: %q", w)
				}
			}
		})
	}
}

func TestWebhooksRejectWhatIsNotAWebApp(t *testing.T) {
	srv := newTestServer(t)
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podResource := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`
	cases := []struct {
		name string
		req  func() *admissionv1.AdmissionRequest
		want string
	}{
		{"pods resource", func() *admissionv1.AdmissionRequest {
			r := webAppRequest(admissionv1.Create, pod)
			r.Kind, r.Resource = podKind, podResource
			return r
		}, "this webhook admits handroll.dev/v1 webapps, not resource v1 pods"},
		{"Pod kind on webapps", func() *admissionv1.AdmissionRequest {
			r := webAppRequest(admissionv1.Create, pod)
			r.Kind = podKind
			return r
		}, "not kind v1 Pod"},
		{"a Pod inside a WebApp request", func() *admissionv1.AdmissionRequest { return webAppRequest(admissionv1.Create, pod) },
			"request.object is v1 Pod, not handroll.dev/v1 WebApp"},
		{"a v1alpha1 object", func() *admissionv1.AdmissionRequest {
			return webAppRequest(admissionv1.Create, strings.Replace(minimalWebApp, "handroll.dev/v1", "handroll.dev/v1alpha1", 1))
		}, "request.object is handroll.dev/v1alpha1 WebApp, not handroll.dev/v1 WebApp"},
		{"no object", func() *admissionv1.AdmissionRequest { return webAppRequest(admissionv1.Create, "") }, "request.object is empty"},
		{"spec of the wrong type", func() *admissionv1.AdmissionRequest {
			return webAppRequest(admissionv1.Create, `{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":{"replicas":"three"}}`)
		}, "decoding request.object as a WebApp"},
	}
	for _, tc := range cases {
		for _, path := range []string{DefaulterPath, ValidatorPath} {
			resp := review(t, srv, path, tc.req())
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("%s at %s: allowed %v, result %+v; want denied 400 containing %q", tc.name, path, resp.Allowed, resp.Result, tc.want)
			}
			if len(resp.Patch) != 0 {
				t.Errorf("%s at %s: a denial carries a patch", tc.name, path)
			}
		}
	}

	// An object without apiVersion and kind is read as the kind the request
	// names (the API server always sends both; controller-runtime's decoder
	// is as lenient).
	resp := review(t, srv, DefaulterPath, webAppRequest(admissionv1.Update, `{"spec":{"image":"x:1"}}`))
	if !resp.Allowed || !bytes.Contains(resp.Patch, []byte(`"path":"/spec/replicas"`)) {
		t.Errorf("object without a kind: allowed %v, patch %s, result %v", resp.Allowed, resp.Patch, resp.Result)
	}
}

func TestWebhooksAllowDeleteAndSubresources(t *testing.T) {
	srv := newTestServer(t)
	invalid := webApp(`"image":"","replicas":99`)
	del := webAppRequest(admissionv1.Delete, "")
	del.OldObject = runtime.RawExtension{Raw: []byte(invalid)}
	status := webAppRequest(admissionv1.Update, invalid)
	status.SubResource = "status"
	scale := webAppRequest(admissionv1.Update, `{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":3}}`)
	scale.SubResource = "scale"
	scale.Kind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	connect := webAppRequest(admissionv1.Connect, "")

	for name, req := range map[string]*admissionv1.AdmissionRequest{"DELETE": del, "status": status, "scale": scale, "CONNECT": connect} {
		for _, path := range []string{DefaulterPath, ValidatorPath} {
			resp := review(t, srv, path, req)
			if !resp.Allowed || len(resp.Patch) != 0 || len(resp.Warnings) != 0 {
				t.Errorf("%s at %s: allowed %v, patch %s, warnings %q, result %v; want a plain allow", name, path, resp.Allowed, resp.Patch, resp.Warnings, resp.Result)
			}
		}
	}
	// The same invalid object on the main resource is denied: the allows
	// above are because of the operation or subresource.
	if resp := review(t, srv, ValidatorPath, webAppRequest(admissionv1.Update, invalid)); resp.Allowed {
		t.Error("UPDATE of an invalid WebApp allowed")
	}
}

// TestMalformedRequestsKeepTheServerServing sends what a broken or hostile
// client might, and then a valid request, which must still be answered.
func TestMalformedRequestsKeepTheServerServing(t *testing.T) {
	srv := newTestServer(t)
	valid, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  webAppRequest(admissionv1.Create, minimalWebApp),
	})
	huge := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"x":"`),
		bytes.Repeat([]byte("a"), 10<<20)...)
	huge = append(huge, `"}}}`...)

	// A fresh reader per request: the client may still be writing the body
	// of a refused request when the response arrives.
	cases := []struct {
		name     string
		body     func() io.Reader
		wantCode int
		want     string
	}{
		{"empty", func() io.Reader { return strings.NewReader("") }, 400, "empty body"},
		{"truncated", func() io.Reader { return bytes.NewReader(valid[:len(valid)-7]) }, 400, "not a JSON object"},
		{"ConversionReview", func() io.Reader {
			return strings.NewReader(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"handroll.dev/v1","objects":[]}}`)
		}, 400, `got kind "ConversionReview"`},
		{"a Pod", func() io.Reader { return strings.NewReader(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`) }, 400, `got kind "Pod"`},
		{"10 MiB", func() io.Reader { return bytes.NewReader(huge) }, 413, "request body larger than"},
		// Without a Content-Length, so the limit is met while reading.
		{"10 MiB chunked", func() io.Reader { return io.MultiReader(bytes.NewReader(huge)) }, 413, "request body larger than"},
	}
	for _, tc := range cases {
		for _, path := range []string{DefaulterPath, ValidatorPath} {
			code, body := postRaw(t, srv.URL+path, tc.body())
			if code != tc.wantCode || !strings.Contains(string(body), tc.want) {
				t.Errorf("%s at %s: got %d %q, want %d containing %q", tc.name, path, code, body, tc.wantCode, tc.want)
			}
		}
	}
	resp := review(t, srv, DefaulterPath, webAppRequest(admissionv1.Create, minimalWebApp))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("valid request after malformed ones: allowed %v, patch %s", resp.Allowed, resp.Patch)
	}
}

// TestGarbageNeverPanics sends random bodies, and random objects inside
// well-formed reviews; every answer must be a 4xx or an admission response,
// never a 500 (ServeAdmission answers a recovered panic with 500).
func TestGarbageNeverPanics(t *testing.T) {
	srv := newTestServer(t)
	r := rand.New(rand.NewSource(42))
	valid, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  webAppRequest(admissionv1.Create, minimalWebApp),
	})
	// JSON-ish tokens; with no "uid" among them no sequence is a valid review.
	tokens := []string{`{`, `}`, `[`, `]`, `:`, `,`, `"kind"`, `"apiVersion"`, `"AdmissionReview"`, `"admission.k8s.io/v1"`, `"request"`, `"object"`, `null`, `1e999`, `-0`, `"\u0000"`, `"\ud800"`, `true`, "\xff"}

	var bodies [][]byte
	for i := range 20 {
		var b []byte
		switch i % 4 {
		case 0: // random bytes
			b = make([]byte, r.Intn(200))
			r.Read(b)
		case 1: // random tokens
			var sb strings.Builder
			for range 1 + r.Intn(30) {
				sb.WriteString(tokens[r.Intn(len(tokens))])
			}
			b = []byte(sb.String())
		case 2: // a valid review cut short: never valid JSON
			b = valid[:r.Intn(len(valid))]
		case 3: // a valid review with its request's uid dropped and a byte changed
			b = bytes.Replace(valid, []byte(`"uid"`), []byte(`"xid"`), 1)
			b = bytes.Clone(b)
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		bodies = append(bodies, b)
	}
	if len(bodies) != 20 {
		t.Fatalf("%d bodies", len(bodies))
	}
	for i, b := range bodies {
		for _, path := range []string{DefaulterPath, ValidatorPath} {
			code, out := postRaw(t, srv.URL+path, bytes.NewReader(b))
			if code < 400 || code >= 500 || len(out) == 0 {
				t.Errorf("garbage %d (%q) at %s: %d %q, want a 4xx with a message", i, b, path, code, out)
			}
		}
	}

	// Well-formed reviews around random objects reach the handlers, which
	// must answer (allowed or denied) rather than panic.
	objects := []string{`null`, `[]`, `{}`, `"x"`, `{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":null}`,
		`{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":{"env":[null,{}],"resources":{"requests":{"cpu":"lots"}}}}`,
		`{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":5}}`,
		`{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":{"service":{"port":1e10}}}`}
	for i := range 12 {
		b := make([]byte, r.Intn(64))
		r.Read(b)
		if m, err := json.Marshal(string(b)); err == nil && i%2 == 0 {
			objects = append(objects, `{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":{"image":`+string(m)+`}}`)
		}
	}
	for _, obj := range objects {
		for _, path := range []string{DefaulterPath, ValidatorPath} {
			req := webAppRequest(admissionv1.Create, obj)
			body, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request:  req,
			})
			if err != nil {
				t.Fatal(err)
			}
			if code, out := postRaw(t, srv.URL+path, bytes.NewReader(body)); code != http.StatusOK {
				t.Errorf("object %s at %s: %d %s", obj, path, code, out)
			}
		}
	}
}

// TestExplicitInvalidValuesAreRefusedNotDefaulted: a default is for a field
// the user left out. A field given with a value the schema refuses (port 0,
// an empty service type) is left as sent by the Defaulter, and the
// Validator refuses it, naming the field; left out, the same field is
// defaulted and the object allowed.
func TestExplicitInvalidValuesAreRefusedNotDefaulted(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, spec, path, field string
	}{
		{"port 0", `"port":0`, "/spec/port", "spec.port"},
		{"service port 0", `"service":{"port":0}`, "/spec/service/port", "spec.service.port"},
		{"service type empty", `"service":{"type":""}`, "/spec/service/type", "spec.service.type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := webApp(validSpec + "," + tc.spec)
			for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
				resp := review(t, srv, DefaulterPath, webAppRequest(op, obj))
				var ops []struct{ Path string }
				if err := json.Unmarshal(resp.Patch, &ops); len(resp.Patch) > 0 && err != nil {
					t.Fatalf("%s: patch %s: %v", op, resp.Patch, err)
				}
				for _, o := range ops {
					if o.Path == tc.path {
						t.Errorf("%s: the Defaulter replaces the explicit %s: %s", op, tc.path, resp.Patch)
					}
				}
				resp = review(t, srv, ValidatorPath, webAppRequest(op, obj))
				if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.field+":") {
					t.Errorf("%s of %s: allowed %v, result %v; want a denial naming %s", op, tc.spec, resp.Allowed, resp.Result, tc.field)
				}
			}
		})
	}
	// Left out, the same fields are defaulted and allowed.
	obj := webApp(validSpec + `,"service":{}`)
	resp := review(t, srv, DefaulterPath, webAppRequest(admissionv1.Create, obj))
	for _, p := range []string{`"path":"/spec/port"`, `"path":"/spec/service/port"`, `"path":"/spec/service/type"`} {
		if !bytes.Contains(resp.Patch, []byte(p)) {
			t.Errorf("the Defaulter's patch %s lacks %s", resp.Patch, p)
		}
	}
	if resp := review(t, srv, ValidatorPath, webAppRequest(admissionv1.Create, obj)); !resp.Allowed {
		t.Errorf("a WebApp leaving port and service out was denied: %v", resp.Result)
	}
}

// TestV1alpha1ContainerPortZeroIsRefused: a v1alpha1 WebApp reaches the
// webhooks converted to v1 (matchPolicy Equivalent). An explicit
// containerPort 0 must arrive as an explicit port 0 and be refused, not be
// defaulted on the way.
func TestV1alpha1ContainerPortZeroIsRefused(t *testing.T) {
	srv := newTestServer(t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	alpha := `{"apiVersion":"handroll.dev/v1alpha1","kind":"WebApp","metadata":{"name":"shop","namespace":"default"},` +
		`"spec":{"image":"example.com/shop:v1","size":2,"containerPort":0,"resources":{"requests":{"cpu":"100m"}}}}`
	codecs := scheme.Codecs(s)
	obj, _, err := codecs.UniversalDeserializer().Decode([]byte(alpha), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What the API server does before calling a webhook for v1: default
	// (the schema's defaults, which the Go defaulter mirrors), then convert.
	s.Default(obj)
	v1 := &handrollv1.WebApp{}
	if err := s.Convert(obj, v1, nil); err != nil {
		t.Fatal(err)
	}
	v1.APIVersion, v1.Kind = handrollv1.SchemeGroupVersion.String(), handrollv1.WebAppKind
	raw, err := json.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	resp := review(t, srv, ValidatorPath, webAppRequest(admissionv1.Create, string(raw)))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "spec.port:") {
		t.Errorf("containerPort 0 through v1alpha1 (%s as v1): allowed %v, result %v; want a denial naming spec.port", raw, resp.Allowed, resp.Result)
	}
}
