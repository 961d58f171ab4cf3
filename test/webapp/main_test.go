// Package webapp tests the WebApp controller against a real etcd and
// kube-apiserver, with bin/handroll running as a separate process. It has a
// control plane of its own, so that what it counts (writes while idle,
// reconcile errors) is the operator's response to these tests alone.
package webapp

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := controlplane.RunTests(m, controlplane.Options{}, &env)
	remove()
	os.Exit(code)
}

func handrollClient(t *testing.T) versioned.Interface { return env.HandrollClient(t) }

// asJSON renders v for failure messages.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
