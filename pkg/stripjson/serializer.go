package stripjson

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NegotiatedSerializer is ns whose JSON serializer strips what it decodes
// (Strip). A REST client given it strips both what a list or get returns
// and each watch event's object: client-go decodes those with the
// serializer of the response's media type, while the watch event around
// an object is read by the stream serializer, left as it is. Encoding is
// unchanged.
func NegotiatedSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	infos := ns.SupportedMediaTypes()
	stripped := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeJSON {
			info.Serializer = serializer{info.Serializer}
		}
		stripped[i] = info
	}
	return negotiated{NegotiatedSerializer: ns, infos: stripped}
}

type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// serializer is a JSON serializer that strips before it decodes.
type serializer struct{ runtime.Serializer }

func (s serializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return s.Serializer.Decode(Strip(data), defaults, into)
}
