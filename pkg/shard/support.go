package shard

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
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
func ServerFilters(ctx context.Context, client dynamic.Interface, namespace string) (bool, error) {
	resource := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	rs, _ := Ranges(1)
	sel := rs[0].Selector()
	list, err := client.Resource(resource).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: sel})
	if err != nil {
		return false, fmt.Errorf("probing shardSelector support on %s: %w", resource.GroupResource(), err)
	}
	info, found, err := unstructuredShardInfo(list.Object)
	if err != nil || !found {
		return false, err
	}
	if info != sel {
		return false, fmt.Errorf("probing shardSelector support on %s: sent %q, the server echoed %q", resource.GroupResource(), sel, info)
	}
	return true, nil
}

func unstructuredShardInfo(list map[string]any) (string, bool, error) {
	meta, ok := list["metadata"].(map[string]any)
	if !ok {
		return "", false, nil
	}
	info, ok := meta["shardInfo"].(map[string]any)
	if !ok {
		return "", false, nil
	}
	sel, ok := info["selector"].(string)
	if !ok {
		return "", false, fmt.Errorf("shardInfo without a selector: %v", info)
	}
	return sel, true, nil
}
