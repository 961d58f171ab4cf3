package roles

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// A user's access to WebApps in one namespace.
type level int

const (
	none level = iota
	viewer
	editor
	admin
)

// access is what each level may do; test/manifests' othersNeed holds the
// same grants as rules. Every request not listed here is refused to all.
var access = []struct {
	verb, subresource string
	from              level // the least level that may; none: nobody
	why               string
}{
	{"get", "", viewer, ""},
	{"list", "", viewer, ""},
	{"watch", "", viewer, ""},
	{"create", "", editor, ""},
	{"update", "", editor, ""},
	{"patch", "", editor, ""},
	{"delete", "", editor, "one by one; kubectl delete --all lists and deletes each"},
	{"deletecollection", "", admin, "one request empties a namespace: admin only, as in kubebuilder's roles"},
	{"get", "status", viewer, ""},
	{"update", "status", none, "the status is the operator's report, overwritten by its next reconcile"},
	{"patch", "status", none, "the same"},
	{"get", "scale", viewer, ""},
	{"update", "scale", editor, "kubectl scale, for whoever may change spec.replicas anyway"},
	{"patch", "scale", editor, ""},
	{"update", "finalizers", none, "only blockOwnerDeletion on the operator's children needs it"},
}

// The ClusterRoles under test and Kubernetes' roles each is aggregated into.
var aggregatedInto = map[string]string{
	"webapp-viewer": "view",
	"webapp-editor": "edit",
	"webapp-admin":  "admin",
}

// TestUserRoles applies the user roles as manifests/default builds them,
// binds alice, bob and carol to webapp-viewer, -editor and -admin, and
// dave to Kubernetes' view, edit and admin, each in a namespace of its
// own, and asks kubectl auth can-i for every request of the access table,
// as each user, in each namespace.
func TestUserRoles(t *testing.T) {
	env.Require(t)
	kubectl := filepath.Join(env.BinDir, "kubectl")
	applyUserRoles(t, kubectl)
	waitAggregated(t)

	nsView, nsEdit, nsAdmin := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	bind(t, nsView, "alice", "webapp-viewer")
	bind(t, nsEdit, "bob", "webapp-editor")
	bind(t, nsAdmin, "carol", "webapp-admin")
	bind(t, nsView, "dave", "view")
	bind(t, nsEdit, "dave", "edit")
	bind(t, nsAdmin, "dave", "admin")

	// where names the namespace in the subtest's name.
	cases := []struct {
		user, where, namespace string // namespace "": every namespace (-A)
		level                  level
	}{
		{"alice", "viewer-ns", nsView, viewer},
		{"bob", "editor-ns", nsEdit, editor},
		{"carol", "admin-ns", nsAdmin, admin},
		// Through aggregation, the built-in roles give exactly as much.
		{"dave", "viewer-ns", nsView, viewer},
		{"dave", "editor-ns", nsEdit, editor},
		{"dave", "admin-ns", nsAdmin, admin},
		// A RoleBinding grants in its own namespace only.
		{"alice", "editor-ns", nsEdit, none},
		{"bob", "admin-ns", nsAdmin, none},
		{"carol", "viewer-ns", nsView, none},
		{"carol", "all-namespaces", "", none},
		{"erin", "viewer-ns", nsView, none}, // bound to nothing
	}
	for _, c := range cases {
		where := c.where
		t.Run(c.user+"/"+where, func(t *testing.T) {
			t.Parallel()
			for _, a := range access {
				want := a.from != none && c.level >= a.from
				got := canI(t, kubectl, c.user, c.namespace, a.verb, a.subresource)
				if got != want {
					what := a.verb + " webapps"
					if a.subresource != "" {
						what += "/" + a.subresource
					}
					t.Errorf("%s may %s in %s: %v, want %v (%s)", c.user, what, where, got, want, a.why)
				}
			}
		})
	}
}

// applyUserRoles applies the ClusterRoles of aggregatedInto from the build
// of manifests/default, so that what is checked is what a cluster gets.
func applyUserRoles(t *testing.T, kubectl string) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, kubectl, nil, "kustomize", filepath.Join(root, "manifests", "default"))
	var docs [][]byte
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("kubectl kustomize manifests/default: %v", err)
		}
		if _, ok := aggregatedInto[meta.Name]; ok && meta.Kind == "ClusterRole" {
			docs = append(docs, []byte(doc))
		}
	}
	if len(docs) != len(aggregatedInto) {
		t.Fatalf("manifests/default builds %d of the ClusterRoles %v", len(docs), slices.Sorted(maps.Keys(aggregatedInto)))
	}
	run(t, kubectl, bytes.Join(docs, []byte("\n---\n")), "--kubeconfig="+env.Kubeconfig, "apply", "--server-side", "-f", "-")
}

// waitAggregated waits until kube-controller-manager has copied each role's
// rules into the Kubernetes role it is aggregated into.
func waitAggregated(t *testing.T) {
	t.Helper()
	rbac := env.KubeClient(t).RbacV1()
	ctx, cancel := budget.Context(t, t.Context(), time.Minute, "kube-controller-manager to aggregate the roles")
	defer cancel()
	for role, into := range aggregatedInto {
		src, err := rbac.ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var last []rbacv1.PolicyRule
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			dst, err := rbac.ClusterRoles().Get(ctx, into, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not aggregated yet: poll again until ctx ends
			}
			last = dst.Rules
			for _, r := range src.Rules {
				if !slices.ContainsFunc(dst.Rules, func(d rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(r, d) }) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("ClusterRole %s did not aggregate %s's rules %v: it has %v", into, role, src.Rules, last)
		}
	}
}

// bind binds user to the ClusterRole role in namespace ns.
func bind(t *testing.T, ns, user, role string) {
	t.Helper()
	_, err := env.KubeClient(t).RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// canI asks `kubectl auth can-i` as user (impersonated by the admin
// kubeconfig): "yes" with exit code 0, "no" with exit code 1; anything
// else, or a warning (such as an unknown resource type, which can-i still
// answers), fails t.
func canI(t *testing.T, kubectl, user, ns, verb, subresource string) bool {
	t.Helper()
	args := []string{"--kubeconfig=" + env.Kubeconfig, "auth", "can-i", verb, "webapps.handroll.dev", "--as=" + user}
	if ns == "" {
		args = append(args, "--all-namespaces")
	} else {
		args = append(args, "--namespace="+ns)
	}
	if subresource != "" {
		args = append(args, "--subresource="+subresource)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), kubectl, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	answer := strings.TrimSpace(stdout.String())
	switch {
	case stderr.Len() > 0:
		t.Fatalf("kubectl %s: exit %d, %q, stderr:\n%s", strings.Join(args, " "), code, answer, stderr.Bytes())
	case answer == "yes" && code == 0:
		return true
	case answer == "no" && code == 1:
		return false
	}
	t.Fatalf("kubectl %s: exit %d, output %q; want yes (0) or no (1)", strings.Join(args, " "), code, answer)
	return false
}

func run(t *testing.T, kubectl string, stdin []byte, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), kubectl, args...)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(stdin), &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}
