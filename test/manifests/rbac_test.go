package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
)

// The identity the Deployment runs as; operatorNS is the namespace
// manifests/default installs into (TestOneNamespace checks it is the one
// its kustomization names).
const (
	operatorNS = "handroll-system"
	operatorSA = "handroll"
)

// rbacObjects is what manifests/rbac holds, decoded strictly (a misspelt
// field such as resourceName fails the decode instead of granting more).
type rbacObjects struct {
	serviceAccounts     []*corev1.ServiceAccount
	roles               []*rbacv1.Role
	clusterRoles        []*rbacv1.ClusterRole
	roleBindings        []*rbacv1.RoleBinding
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	source              map[string]string // "Kind namespace/name" → file
}

// readRBAC reads every YAML file of manifests/rbac and checks that the
// kustomization lists exactly those files, so that what is checked here is
// what `kubectl apply -k` applies. Only the kinds test/webapp's
// TestManifestRBACIsEnough can move into a test namespace are accepted.
func readRBAC(t *testing.T) *rbacObjects {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "manifests", "rbac")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("manifests/rbac/kustomization.yaml: %v", err)
	}
	var onDisk []string
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" {
			onDisk = append(onDisk, name)
		}
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(listed, onDisk) {
		t.Fatalf("manifests/rbac/kustomization.yaml lists %v, but the directory holds %v: list every file, or remove it", listed, onDisk)
	}

	objs := &rbacObjects{source: map[string]string{}}
	for _, name := range onDisk {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(data)
		if err != nil {
			t.Fatalf("manifests/rbac/%s: %v", name, err)
		}
		for _, doc := range docs {
			key, err := objs.add(doc)
			if err != nil {
				t.Fatalf("manifests/rbac/%s: %v", name, err)
			}
			if prev, dup := objs.source[key]; dup {
				t.Fatalf("%s is defined twice: in %s and in %s", key, prev, name)
			}
			objs.source[key] = name
		}
	}
	return objs
}

func (o *rbacObjects) add(doc []byte) (string, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", err
	}
	var (
		meta metav1.Object
		err  error
	)
	switch tm.Kind {
	case "ServiceAccount":
		var x *corev1.ServiceAccount
		if x, err = decodeStrict[corev1.ServiceAccount](doc, tm, "v1"); err == nil {
			o.serviceAccounts, meta = append(o.serviceAccounts, x), x
		}
	case "Role":
		var x *rbacv1.Role
		if x, err = decodeStrict[rbacv1.Role](doc, tm, rbacv1.SchemeGroupVersion.String()); err == nil {
			o.roles, meta = append(o.roles, x), x
		}
	case "ClusterRole":
		var x *rbacv1.ClusterRole
		if x, err = decodeStrict[rbacv1.ClusterRole](doc, tm, rbacv1.SchemeGroupVersion.String()); err == nil {
			o.clusterRoles, meta = append(o.clusterRoles, x), x
		}
	case "RoleBinding":
		var x *rbacv1.RoleBinding
		if x, err = decodeStrict[rbacv1.RoleBinding](doc, tm, rbacv1.SchemeGroupVersion.String()); err == nil {
			o.roleBindings, meta = append(o.roleBindings, x), x
		}
	case "ClusterRoleBinding":
		var x *rbacv1.ClusterRoleBinding
		if x, err = decodeStrict[rbacv1.ClusterRoleBinding](doc, tm, rbacv1.SchemeGroupVersion.String()); err == nil {
			o.clusterRoleBindings, meta = append(o.clusterRoleBindings, x), x
		}
	default:
		return "", fmt.Errorf("kind %q: manifests/rbac holds only ServiceAccount, Role, ClusterRole, RoleBinding and ClusterRoleBinding "+
			"(test/webapp's TestManifestRBACIsEnough creates each of them for the operator it runs)", tm.Kind)
	}
	if err != nil {
		return "", err
	}
	if err := o.install(tm.Kind, meta); err != nil {
		return "", err
	}
	return objectKey(tm.Kind, meta.GetNamespace(), meta.GetName()), nil
}

// install does what manifests/default's namespace: does to an object of
// manifests/rbac: namespaced objects and the ServiceAccount subjects go
// into operatorNS. A namespace written in manifests/rbac is an error: it
// would be a second place naming the operator's namespace, and an overlay
// that moves the install must be able to move everything.
func (o *rbacObjects) install(kind string, meta metav1.Object) error {
	if ns := meta.GetNamespace(); ns != "" {
		return fmt.Errorf("%s %s names namespace %q: leave it out, manifests/default's namespace: sets it", kind, meta.GetName(), ns)
	}
	subjects := func(ss []rbacv1.Subject) error {
		for i := range ss {
			if ss[i].Namespace != "" {
				return fmt.Errorf("%s %s: subject %s names namespace %q: leave it out, manifests/default's namespace: sets it", kind, meta.GetName(), ss[i].Name, ss[i].Namespace)
			}
			if ss[i].Kind == rbacv1.ServiceAccountKind {
				ss[i].Namespace = operatorNS
			}
		}
		return nil
	}
	switch x := meta.(type) {
	case *rbacv1.ClusterRole:
		return nil
	case *rbacv1.ClusterRoleBinding:
		return subjects(x.Subjects)
	case *rbacv1.RoleBinding:
		if err := subjects(x.Subjects); err != nil {
			return err
		}
	}
	meta.SetNamespace(operatorNS)
	return nil
}

// decodeStrict decodes doc into a T, failing on a field T does not have.
func decodeStrict[T any](doc []byte, tm metav1.TypeMeta, apiVersion string) (*T, error) {
	if tm.APIVersion != apiVersion {
		return nil, fmt.Errorf("%s has apiVersion %q, want %q", tm.Kind, tm.APIVersion, apiVersion)
	}
	x := new(T)
	if err := yaml.UnmarshalStrict(doc, x); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return x, nil
}

func objectKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// splitYAML splits a multi-document YAML file, dropping empty documents.
func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// grant is one request a role allows: a verb on a resource (with its
// subresource), in a scope, on one named object or ("") on any. A
// non-resource URL is its resource, with apiGroup "".
type grant struct {
	scope        scope
	apiGroup     string
	resource     string
	verb         string
	resourceName string
}

func (g grant) String() string {
	group := g.apiGroup
	if group == "" {
		group = "core"
	}
	if strings.HasPrefix(g.resource, "/") {
		group = "non-resource URL"
	}
	s := fmt.Sprintf("%s %s %s (%s)", g.verb, group, g.resource, g.scope)
	if g.resourceName != "" {
		s += " named " + g.resourceName
	}
	return s
}

// expand lists every grant of rules in scope s. Wildcards are kept as "*",
// which no need names, so a wildcard always shows up as an extra grant.
func expand(s scope, rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, verb := range r.Verbs {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					for _, name := range names {
						out = append(out, grant{s, group, res, verb, name})
					}
				}
			}
			for _, url := range r.NonResourceURLs {
				out = append(out, grant{s, "", url, verb, ""})
			}
		}
	}
	return out
}

// expandNeeds lists the grants the table asks for, with their reasons.
func expandNeeds(needs []need) (map[grant]string, error) {
	out := map[grant]string{}
	for _, n := range needs {
		if n.Why == "" || len(n.Verbs) == 0 || (n.Scope != cluster && n.Scope != operatorNamespace) {
			return nil, fmt.Errorf("incomplete entry %+v: every need has a scope, verbs and a Why", n)
		}
		names := n.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, verb := range n.Verbs {
			for _, name := range names {
				g := grant{n.Scope, n.APIGroup, n.Resource, verb, name}
				if _, dup := out[g]; dup {
					return nil, fmt.Errorf("%s is listed twice", g)
				}
				out[g] = n.Why
			}
		}
	}
	return out, nil
}

func isOperator(subjects []rbacv1.Subject) bool {
	return len(subjects) == 1 && subjects[0] == rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: operatorNS}
}

// TestRBACBindings checks the shape around the rules: one ServiceAccount,
// every binding binds it and names a role that exists, Roles only in the
// operator's namespace, and every role either bound or meant for others.
func TestRBACBindings(t *testing.T) {
	objs := readRBAC(t)

	if len(objs.serviceAccounts) != 1 || objs.serviceAccounts[0].Namespace != operatorNS || objs.serviceAccounts[0].Name != operatorSA {
		t.Errorf("manifests/rbac must define exactly the ServiceAccount %s/%s the Deployment runs as", operatorNS, operatorSA)
	}
	roles := map[string]bool{}
	for _, r := range objs.roles {
		if r.Namespace != operatorNS {
			t.Errorf("Role %s/%s (%s): Roles belong in %s; a grant elsewhere is cluster-wide and goes in a ClusterRole",
				r.Namespace, r.Name, objs.source[objectKey("Role", r.Namespace, r.Name)], operatorNS)
		}
		roles[r.Name] = true
	}
	clusterRoles := map[string]bool{}
	for _, r := range objs.clusterRoles {
		clusterRoles[r.Name] = true
	}

	bound := map[string]bool{} // "Role name" or "ClusterRole name"
	checkRef := func(what string, ref rbacv1.RoleRef, allowRole bool) {
		t.Helper()
		switch {
		case ref.APIGroup != rbacv1.GroupName:
			t.Errorf("%s: roleRef.apiGroup %q, want %s", what, ref.APIGroup, rbacv1.GroupName)
		case ref.Kind == "Role" && allowRole && roles[ref.Name], ref.Kind == "ClusterRole" && clusterRoles[ref.Name]:
			bound[ref.Kind+" "+ref.Name] = true
		default:
			t.Errorf("%s: roleRef %s %q is not defined in manifests/rbac", what, ref.Kind, ref.Name)
		}
	}
	for _, b := range objs.roleBindings {
		what := fmt.Sprintf("RoleBinding %s/%s (%s)", b.Namespace, b.Name, objs.source[objectKey("RoleBinding", b.Namespace, b.Name)])
		if b.Namespace != operatorNS {
			t.Errorf("%s: RoleBindings belong in %s", what, operatorNS)
		}
		if !isOperator(b.Subjects) {
			t.Errorf("%s binds %v, want only ServiceAccount %s/%s", what, b.Subjects, operatorNS, operatorSA)
		}
		checkRef(what, b.RoleRef, true)
	}
	for _, b := range objs.clusterRoleBindings {
		what := fmt.Sprintf("ClusterRoleBinding %s (%s)", b.Name, objs.source[objectKey("ClusterRoleBinding", "", b.Name)])
		if !isOperator(b.Subjects) {
			t.Errorf("%s binds %v, want only ServiceAccount %s/%s", what, b.Subjects, operatorNS, operatorSA)
		}
		checkRef(what, b.RoleRef, false)
	}

	for _, r := range objs.roles {
		if !bound["Role "+r.Name] {
			t.Errorf("Role %s/%s is bound by no RoleBinding in manifests/rbac: bind it to the operator or remove it", r.Namespace, r.Name)
		}
	}
	for _, r := range objs.clusterRoles {
		_, forOthers := othersNeed[r.Name]
		switch {
		case bound["ClusterRole "+r.Name] && forOthers:
			t.Errorf("ClusterRole %s is meant for others (othersNeed) but is bound to the operator", r.Name)
		case !bound["ClusterRole "+r.Name] && !forOthers:
			t.Errorf("ClusterRole %s is bound by nothing in manifests/rbac: bind it to the operator, list it in othersNeed with its reason, or remove it", r.Name)
		}
	}
}

// TestRBACGrantsExactlyWhatTheCodeNeeds expands every role bound to the
// operator into single grants and compares them with operatorNeeds both
// ways; the roles meant for others are compared with othersNeed.
func TestRBACGrantsExactlyWhatTheCodeNeeds(t *testing.T) {
	objs := readRBAC(t)
	want, err := expandNeeds(operatorNeeds)
	if err != nil {
		t.Fatalf("permissions_test.go operatorNeeds: %v", err)
	}

	roleRules := map[string][]rbacv1.PolicyRule{}
	for _, r := range objs.roles {
		roleRules["Role "+r.Name] = r.Rules
	}
	for _, r := range objs.clusterRoles {
		roleRules["ClusterRole "+r.Name] = r.Rules
	}
	got := map[grant][]string{} // grant → the roles granting it
	bind := func(s scope, ref rbacv1.RoleRef, binding string) {
		role := ref.Kind + " " + ref.Name
		for _, g := range expand(s, roleRules[role]) {
			got[g] = append(got[g], fmt.Sprintf("%s (%s, bound by %s)", role, objs.source[objectKey(ref.Kind, roleNamespace(ref), ref.Name)], binding))
		}
	}
	for _, b := range objs.roleBindings {
		if b.Namespace == operatorNS && isOperator(b.Subjects) {
			bind(operatorNamespace, b.RoleRef, "RoleBinding "+b.Name)
		}
	}
	for _, b := range objs.clusterRoleBindings {
		if isOperator(b.Subjects) {
			bind(cluster, b.RoleRef, "ClusterRoleBinding "+b.Name)
		}
	}

	for _, g := range sortedKeys(want) {
		if _, ok := got[g]; !ok {
			t.Errorf("missing grant: %s\n\tneeded by %s\n\tgrant it in manifests/rbac", g, want[g])
		}
	}
	for _, g := range sortedKeys(got) {
		if _, ok := want[g]; !ok {
			t.Errorf("extra grant: %s\n\tfrom %s\n\tno code needs it: remove the rule, or add it to operatorNeeds in test/manifests/permissions_test.go "+
				"with the file and function that makes the request", g, strings.Join(got[g], "; "))
		}
	}

	for _, r := range objs.clusterRoles {
		need, ok := othersNeed[r.Name]
		if !ok {
			continue
		}
		wantOthers := need.grants()
		gotOthers := expand(cluster, r.Rules)
		sortGrants(wantOthers)
		sortGrants(gotOthers)
		if !slices.Equal(gotOthers, wantOthers) {
			t.Errorf("ClusterRole %s grants %v, want exactly %v (%s)", r.Name, gotOthers, wantOthers, need.Why)
		}
	}
	for name := range othersNeed {
		if !slices.ContainsFunc(objs.clusterRoles, func(r *rbacv1.ClusterRole) bool { return r.Name == name }) {
			t.Errorf("othersNeed lists ClusterRole %s, which manifests/rbac does not define", name)
		}
	}
}

// aggregateLabel is the label prefix by which a ClusterRole joins one of
// Kubernetes' user-facing roles (admin, edit, view).
const aggregateLabel = "rbac.authorization.k8s.io/aggregate-to-"

// TestRBACAggregation checks where the roles of manifests/rbac are
// aggregated: exactly where othersNeed says, never an operator role (that
// would hand the operator's cluster-wide grants to every namespace editor),
// and with the order of Kubernetes' roles kept: what view aggregates only
// reads, and each of view, edit, admin gets at least the WebApp grants of
// the one before it.
func TestRBACAggregation(t *testing.T) {
	objs := readRBAC(t)
	byTarget := map[string][]grant{}
	for _, r := range objs.clusterRoles {
		var got []string
		for k, v := range r.Labels {
			if target, ok := strings.CutPrefix(k, aggregateLabel); ok {
				if v != "true" {
					t.Errorf("ClusterRole %s: label %s=%q; aggregation takes only \"true\"", r.Name, k, v)
				}
				got = append(got, target)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(othersNeed[r.Name].AggregateTo))
		if !slices.Equal(got, want) {
			t.Errorf("ClusterRole %s (%s) is aggregated into %v, want %v", r.Name, objs.source[objectKey("ClusterRole", "", r.Name)], got, want)
		}
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s has an aggregationRule: the controller would replace its rules", r.Name)
		}
		for _, target := range want {
			byTarget[target] = append(byTarget[target], expand(cluster, r.Rules)...)
		}
	}
	for _, g := range byTarget["view"] {
		if !slices.Contains([]string{"get", "list", "watch"}, g.verb) {
			t.Errorf("view aggregates %s: Kubernetes' view role only reads", g)
		}
	}
	for _, pair := range [][2]string{{"view", "edit"}, {"edit", "admin"}} {
		for _, g := range byTarget[pair[0]] {
			if !slices.Contains(byTarget[pair[1]], g) {
				t.Errorf("%s aggregates %s but %s does not: a user of %s would have less than one of %s", pair[0], g, pair[1], pair[1], pair[0])
			}
		}
	}
	for _, target := range []string{"admin", "edit", "view"} {
		if len(byTarget[target]) == 0 {
			t.Errorf("no ClusterRole of manifests/rbac is aggregated into %s", target)
		}
	}
}

// roleNamespace is where the role a RoleRef names was defined: Roles exist
// only in the operator's namespace (TestRBACBindings).
func roleNamespace(ref rbacv1.RoleRef) string {
	if ref.Kind == "Role" {
		return operatorNS
	}
	return ""
}

func sortedKeys[V any](m map[grant]V) []grant {
	keys := make([]grant, 0, len(m))
	for g := range m {
		keys = append(keys, g)
	}
	sortGrants(keys)
	return keys
}

func sortGrants(gs []grant) {
	sort.Slice(gs, func(i, j int) bool { return gs[i].String() < gs[j].String() })
}
