package stripjson

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkDecodeWebApp decodes a watch event's WebApp (webApp: three
// managers' managedFields, the last-applied annotation, a status) as the
// REST client does, whole and stripped; and Strip's scan alone.
func BenchmarkDecodeWebApp(b *testing.B) {
	data := mustJSON(b, webApp("a"))
	whole, stripped := jsonDecoders(b)
	for _, bc := range []struct {
		name string
		dec  runtime.Decoder
	}{{"whole", whole}, {"stripped", stripped}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := runtime.Decode(bc.dec, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("strip only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			Strip(data)
		}
	})
}
