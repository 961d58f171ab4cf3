package cache

import (
	"k8s.io/client-go/rest"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned/scheme"
	handrollv1client "github.com/handroll/handroll/pkg/generated/clientset/versioned/typed/handroll/v1"
	"github.com/handroll/handroll/pkg/stripjson"
)

// InformerClient is c for the WebApps' informers: its handroll.dev/v1
// client decodes WebApps without their managedFields and last-applied
// annotation (stripjson), which StripForCache would drop once decoded:
// nearly half of a watch event's decode (BenchmarkDecodeWebApp). The
// requests share c's rate limiter, as they did when the informers used c.
// The rest of c (the other versions, discovery) is c's; writes keep c
// itself.
func InformerClient(cfg *rest.Config, c clientset.Interface) (clientset.Interface, error) {
	config := rest.CopyConfig(cfg)
	gv := handrollv1.SchemeGroupVersion
	config.GroupVersion = &gv
	config.APIPath = "/apis"
	// As the generated client's setConfigDefaults, the serializer wrapped.
	config.NegotiatedSerializer = stripjson.NegotiatedSerializer(
		rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion())
	if config.UserAgent == "" {
		config.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if r := c.HandrollV1().RESTClient(); r != nil && r.GetRateLimiter() != nil {
		config.RateLimiter = r.GetRateLimiter()
	}
	rc, err := rest.RESTClientFor(config)
	if err != nil {
		return nil, err
	}
	return strippingClientset{Interface: c, v1: handrollv1client.New(rc)}, nil
}

type strippingClientset struct {
	clientset.Interface
	v1 *handrollv1client.HandrollV1Client
}

func (s strippingClientset) HandrollV1() handrollv1client.HandrollV1Interface { return s.v1 }
