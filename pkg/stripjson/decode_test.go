package stripjson

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned/scheme"
)

// jsonDecoders are the decoder the generated client's REST client decodes
// a list or a watch event's object with, and its stripping twin.
func jsonDecoders(t testing.TB) (whole, stripped runtime.Decoder) {
	t.Helper()
	pick := func(ns runtime.NegotiatedSerializer) runtime.Decoder {
		info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
		if !ok {
			t.Fatal("no JSON serializer")
		}
		return ns.DecoderToVersion(info.Serializer, handrollv1.SchemeGroupVersion)
	}
	ns := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	return pick(ns), pick(NegotiatedSerializer(ns))
}

// dropped is obj as Strip would have it decoded: without managedFields
// and the last-applied annotation, its own or its items'.
func dropped(t testing.TB, obj runtime.Object) {
	t.Helper()
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, func(o runtime.Object) error { dropped(t, o); return nil }); err != nil {
			t.Fatal(err)
		}
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	m.SetManagedFields(nil)
	delete(m.GetAnnotations(), LastApplied)
}

// checkDecode: when data decodes into a new into(), Strip(data) decodes
// to the same object with managedFields and the annotation dropped.
func checkDecode(t *testing.T, data []byte, into func() runtime.Object) {
	t.Helper()
	whole, stripped := jsonDecoders(t)
	want, _, err := whole.Decode(data, nil, into())
	if err != nil {
		return
	}
	dropped(t, want)
	got, _, err := stripped.Decode(data, nil, into())
	if err != nil {
		t.Fatalf("%s decodes whole, not stripped (%s): %v", data, Strip(data), err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s stripped (%s) decodes to\n%#v\nwant\n%#v", data, Strip(data), got, want)
	}
}

func TestStripDecodes(t *testing.T) {
	w := webApp("a")
	if len(Strip(mustJSON(t, w))) >= len(mustJSON(t, w))/2 {
		t.Error("Strip cut less than half of the fixture")
	}
	checkDecode(t, mustJSON(t, w), func() runtime.Object { return &handrollv1.WebApp{} })
	list := &handrollv1.WebAppList{TypeMeta: metav1.TypeMeta{APIVersion: "handroll.dev/v1", Kind: "WebAppList"},
		Items: []handrollv1.WebApp{*w, *webApp("b")}}
	checkDecode(t, mustJSON(t, list), func() runtime.Object { return &handrollv1.WebAppList{} })
}

// FuzzStrip: Strip never panics; what it returns changed is valid JSON
// made from valid JSON; and it decodes as the description of Strip says,
// as a WebApp and as a WebAppList.
func FuzzStrip(f *testing.F) {
	w := webApp("a")
	f.Add(mustJSON(f, w))
	f.Add(mustJSON(f, &handrollv1.WebAppList{Items: []handrollv1.WebApp{*w, *webApp("b")}}))
	for _, s := range []string{
		`{"metadata":{"managedFields":[{"manager":"m"}],"name":"a","annotations":{"` + LastApplied + `":"x","b":"c"}}}`,
		`{"metadata":{"managed\u0046ields":[{"manager":"m"}]},"spec":{"config":{"managedFields":"1"}}}`,
		`{"items":[{"metadata":{"managedFields":[]}},{"metadata":{"name":"b","managedFields":null}}]}`,
		`{"metadata":{"managedFields":1,"managedFields":[],"annotations":{"a":"1"},"annotations":{"` + LastApplied + `":"x"}}}`,
		" {\"metadata\" : {\"name\":\"a\\\"\" , \"managedFields\" : [ ] } } ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := Strip(data)
		if len(out) != len(data) && (!json.Valid(data) || !json.Valid(out)) {
			t.Fatalf("Strip(%q) = %q", data, out)
		}
		checkDecode(t, data, func() runtime.Object { return &handrollv1.WebApp{} })
		checkDecode(t, data, func() runtime.Object { return &handrollv1.WebAppList{} })
	})
}
