package shard

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServerFilters reports whether the API server applies a shardSelector to
// lists and watches. It lists at most one ConfigMap of namespace with a
// selector and looks for the selector echoed in the list's shardInfo: an
// API server without the ShardedListAndWatch feature gate ignores the
// parameter and echoes nothing, and a replica that trusted it would cache,
// and reconcile, every range.
//
// ConfigMaps answer for the WebApps too. The gate is one per API server,
// and the custom resource is served by the same process and filtered, but
// its list cannot say so: an unstructured list has no shardInfo to echo
// (test/shard shows both).
func ServerFilters(ctx context.Context, client kubernetes.Interface, namespace string) (bool, error) {
	rs, _ := Ranges(1)
	sel := rs[0].Selector()
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: sel})
	if err != nil {
		return false, fmt.Errorf("probing the API server for shardSelector: %w", err)
	}
	switch info := list.ShardInfo; {
	case info == nil:
		return false, nil
	case info.Selector != sel:
		return false, fmt.Errorf("probing the API server for shardSelector: sent %q, it echoed %q", sel, info.Selector)
	}
	return true, nil
}
