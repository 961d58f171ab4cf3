package gitops

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// The health statuses Argo CD accepts from a script; anything else it shows
// as Unknown.
var argoHealthStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

// healthScript is manifests/argocd/health.lua.
func healthScript(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// argoHealth runs script on u as Argo CD runs a health check configured in
// argocd-cm (argo-cd util/lua, VM.runLua and VM.ExecuteHealthLua): a state
// with only the package, base and table libraries open (Argo CD adds a
// trimmed os library, which the script does not use), a one-second
// deadline, the object as the global obj, and the table the script returns
// read for status and message.
func argoHealth(t *testing.T, script string, u *unstructured.Unstructured) (healthStatus, message string) {
	t.Helper()
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := budget.Context(t, context.Background(), time.Second, "the Argo CD health script")
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, u.Object))
	if err := l.DoString(script); err != nil {
		t.Fatalf("health.lua on %s: %v", u.GetName(), err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %s, Argo CD expects a table", l.Get(-1).Type())
	}
	st, ok := ret.RawGetString("status").(lua.LString)
	if !ok || !argoHealthStatuses[string(st)] {
		t.Fatalf("health.lua returned status %v, which Argo CD reads as Unknown", ret.RawGetString("status"))
	}
	switch m := ret.RawGetString("message").(type) {
	case lua.LString:
		message = string(m)
	case *lua.LNilType:
	default:
		t.Fatalf("health.lua returned a message of type %s, not a string", m.Type())
	}
	return string(st), message
}

// toLua converts an unstructured object's values as Argo CD does (argo-cd
// util/lua decodeValue): numbers of any kind become Lua numbers, slices
// array tables, maps tables keyed by string.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		tbl := l.CreateTable(len(v), 0)
		for _, item := range v {
			tbl.Append(toLua(l, item))
		}
		return tbl
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), toLua(l, item))
		}
		return tbl
	}
	return lua.LNil
}

// argoCMKey is where argocd-cm takes a health check for handroll.dev WebApps.
const argoCMKey = "resource.customizations.health.handroll.dev_WebApp"

var yamlBlockRE = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestDocsEmbedTheShippedHealthCheck: the argocd-cm snippet in
// docs/gitops.md is valid YAML and holds manifests/argocd/health.lua byte
// for byte, so the two cannot drift apart.
func TestDocsEmbedTheShippedHealthCheck(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := healthScript(t)
	found := 0
	for _, m := range yamlBlockRE.FindAllSubmatch(doc, -1) {
		if !bytes.Contains(m[1], []byte(argoCMKey)) {
			continue
		}
		found++
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(m[1], &cm); err != nil {
			t.Fatalf("docs/gitops.md: the argocd-cm snippet is not a ConfigMap: %v", err)
		}
		if cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" {
			t.Errorf("docs/gitops.md: the snippet is %s %s, want ConfigMap argocd-cm", cm.Kind, cm.Name)
		}
		if got := cm.Data[argoCMKey]; got != want {
			t.Errorf("docs/gitops.md: %s is not manifests/argocd/health.lua:\n%s", argoCMKey, got)
		}
	}
	if found != 1 {
		t.Errorf("docs/gitops.md has %d yaml blocks with %s, want 1", found, argoCMKey)
	}
}
