package webapp

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// DirectoryName is the ConfigMap, in the operator's namespace, that maps
// every WebApp to its URL. Keys are "<namespace>.<name>": neither a
// namespace nor a WebApp name can hold a dot, and a ConfigMap key cannot
// hold a slash.
const DirectoryName = "webapp-directory"

// LegacyFinalizerDirectory is the finalizer the first version of the
// directory put on every WebApp, to remove its entry before the WebApp went.
// The directory no longer needs it (DirectoryReconciler recomputes the
// whole directory from the cache), so nothing adds it; the WebApp reconciler
// strips it wherever it finds it: on WebApps written by that version, and on
// exported YAML created again.
const LegacyFinalizerDirectory = "handroll.dev/directory"

// DirectoryKey is a WebApp's key in the directory ConfigMap.
func DirectoryKey(namespace, name string) string { return namespace + "." + name }

// DesiredDirectory is the directory that webapps call for: an entry for
// every WebApp that is not being deleted and whose Service, as serviceOf
// finds it (nil: none), it controls. A WebApp whose Service is not made yet,
// or whose Service's name is taken by an object it does not control, is not
// advertised. It is pure, so the controller-runtime twin uses it too.
func DesiredDirectory(webapps []*handrollv1.WebApp, serviceOf func(namespace, name string) *corev1.Service) map[string]string {
	entries := make(map[string]string, len(webapps))
	for _, w := range webapps {
		if w.DeletionTimestamp != nil {
			continue
		}
		if svc := serviceOf(w.Namespace, w.Name); svc != nil && metav1.IsControlledBy(svc, w) {
			entries[DirectoryKey(w.Namespace, w.Name)] = URL(w)
		}
	}
	return entries
}

// ManagedDirectoryKeys tells which directory keys a process that watches
// namespaces keeps: those of its namespaces, every key when it watches all
// (namespaces empty or [""]). Processes with --namespaces of their own can
// share one operator namespace, and so one directory, without removing each
// other's entries.
func ManagedDirectoryKeys(namespaces []string) func(key string) bool {
	if len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) {
		return func(string) bool { return true }
	}
	watched := map[string]bool{}
	for _, ns := range namespaces {
		watched[ns] = true
	}
	return func(key string) bool {
		ns, _, ok := strings.Cut(key, ".")
		return ok && watched[ns]
	}
}

// DirectoryChanges is what turns current into desired, for the keys that
// manages says are ours: the value to set, or nil to remove the key. Empty
// when nothing differs. Its JSON is the "data" of a merge patch.
func DirectoryChanges(current, desired map[string]string, manages func(key string) bool) map[string]*string {
	changes := map[string]*string{}
	for k, v := range desired {
		if got, ok := current[k]; !ok || got != v {
			changes[k] = &v
		}
	}
	for k := range current {
		if _, ok := desired[k]; !ok && manages(k) {
			changes[k] = nil
		}
	}
	return changes
}
