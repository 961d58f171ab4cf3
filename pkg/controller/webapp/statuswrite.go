package webapp

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/apply"

	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned/scheme"
)

// ApplyStatus writes ac's status by server-side apply, as the typed
// client's ApplyStatus does, through client, a REST client of
// handroll.dev/v1 (the clientset's HandrollV1().RESTClient()). It leaves
// the API server's answer undecoded: the reconciler never reads it (the
// cache brings the WebApp back), and decoding a WebApp from JSON is most
// of what the write costs the operator. An error answer is decoded into
// the error, as the typed client's is.
func ApplyStatus(ctx context.Context, client rest.Interface, ac *handrollac.WebAppApplyConfiguration) error {
	if ac == nil || ac.Name == nil || ac.Namespace == nil {
		return errors.New("a WebApp's status is applied by namespace and name")
	}
	req, err := apply.NewRequest(client, ac)
	if err != nil {
		return err
	}
	opts := applyOptions.ToPatchOptions()
	return req.Namespace(*ac.Namespace).Resource("webapps").Name(*ac.Name).SubResource("status").
		VersionedParams(&opts, scheme.ParameterCodec).
		Do(ctx).Error()
}

// applyStatus writes ac's status through StatusClient when it is set, else
// through the typed client (a fake clientset has no REST client).
func (r *Reconciler) applyStatus(ctx context.Context, ac *handrollac.WebAppApplyConfiguration) error {
	if r.StatusClient != nil {
		return ApplyStatus(ctx, r.StatusClient, ac)
	}
	_, err := r.Client.HandrollV1().WebApps(*ac.Namespace).ApplyStatus(ctx, ac, applyOptions)
	return err
}
