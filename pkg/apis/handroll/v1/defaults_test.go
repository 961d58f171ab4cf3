package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
)

func TestDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   handrollv1.WebAppSpec
		want handrollv1.WebAppSpec
	}{{
		name: "empty spec gets every default",
		in:   handrollv1.WebAppSpec{Image: "nginx"},
		want: handrollv1.WebAppSpec{
			Image:    "nginx",
			Replicas: ptr.To[int32](1),
			Port:     ptr.To[int32](8080),
			Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](80)},
		},
	}, {
		name: "zero replicas is kept: it is a valid request to scale to zero",
		in:   handrollv1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](0)},
		want: handrollv1.WebAppSpec{
			Image:    "nginx",
			Replicas: ptr.To[int32](0),
			Port:     ptr.To[int32](8080),
			Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeClusterIP), Port: ptr.To[int32](80)},
		},
	}, {
		name: "values that are set are kept, missing service fields are filled",
		in: handrollv1.WebAppSpec{
			Image:    "nginx",
			Replicas: ptr.To[int32](3),
			Port:     ptr.To[int32](9090),
			Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort)},
		},
		want: handrollv1.WebAppSpec{
			Image:    "nginx",
			Replicas: ptr.To[int32](3),
			Port:     ptr.To[int32](9090),
			Service:  &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](80)},
		},
	}, {
		// A default is for a field left out. Given, even as a zero that
		// validation refuses, a value is kept, so that it is refused rather
		// than silently replaced.
		name: "explicit zero ports and empty service type are kept",
		in: handrollv1.WebAppSpec{
			Image:   "nginx",
			Port:    ptr.To[int32](0),
			Service: &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType](""), Port: ptr.To[int32](0)},
		},
		want: handrollv1.WebAppSpec{
			Image:    "nginx",
			Replicas: ptr.To[int32](1),
			Port:     ptr.To[int32](0),
			Service:  &handrollv1.WebAppService{Type: ptr.To[handrollv1.ServiceType](""), Port: ptr.To[int32](0)},
		},
	}}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Through the scheme, as a decoder or webhook applies them: this
			// also proves AddToScheme registered the generated defaulters.
			w := &handrollv1.WebApp{Spec: *tc.in.DeepCopy()}
			s.Default(w)
			if diff := cmp.Diff(tc.want, w.Spec); diff != "" {
				t.Errorf("scheme.Default (-want +got):\n%s", diff)
			}

			// Defaulting twice changes nothing.
			again := w.DeepCopy()
			handrollv1.SetObjectDefaults_WebApp(again)
			if diff := cmp.Diff(w, again); diff != "" {
				t.Errorf("defaulting is not idempotent (-first +second):\n%s", diff)
			}
		})
	}
}
