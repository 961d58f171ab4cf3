package logs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// run starts the operator with args on a Lease of its own, creates the
// WebApp ns/web, waits until some line of the log is its reconcile (per
// reconciled), stops the operator with SIGTERM and returns the namespaces
// and every line the process wrote (stdout and stderr: it writes nothing
// but logs). test/operator prints the log when t fails.
func run(t *testing.T, reconciled func(line, ns string) bool, args ...string) (opNS, ns string, lines []string) {
	t.Helper()
	opNS, ns = env.Namespace(t), env.Namespace(t)
	op := operator.Start(t, env.Kubeconfig, append([]string{
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
		"--namespaces=" + ns,
		"-v=5", // for the reconcile's own line
	}, args...)...)
	ctx, cancel := budget.Context(t, context.Background(), time.Minute, "the WebApp's reconcile and its log lines")
	defer cancel()
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}
	if _, err := env.HandrollClient(t).HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the WebApp: %v", err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, l := range strings.Split(op.Log(), "\n") {
			if reconciled(l, ns) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no line logs the reconcile of %s/web: %v\n%s", ns, err, op.Log())
	}
	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, op.Log())
	}
	return opNS, ns, strings.Split(strings.TrimSuffix(op.Log(), "\n"), "\n")
}

// TestJSONFormat: with --logging-format=json every line is one JSON object
// in component-base's format (ts, caller, msg; v on info lines, err on
// error lines), and the key/value pairs of klog.InfoS and of the loggers
// that pkg/leader and pkg/controller build are fields of their own.
func TestJSONFormat(t *testing.T) {
	var entries []map[string]any
	opNS, ns, lines := run(t, func(line, ns string) bool {
		e, err := decode(line)
		return err == nil && e["msg"] == "Reconcile successful" && e["controller"] == "webapp" && equal(e["object"], map[string]any{"name": "web", "namespace": ns})
	}, "--logging-format=json")
	for i, l := range lines {
		e, err := decode(l)
		if err != nil {
			t.Errorf("line %d is not one JSON object: %v\n%s", i+1, err, l)
			continue
		}
		entries = append(entries, e)
		if ts, ok := e["ts"].(json.Number); !ok || ts.String() == "" {
			t.Errorf("line %d: ts %v, want a number (ms since the epoch)\n%s", i+1, e["ts"], l)
		}
		if msg, ok := e["msg"].(string); !ok || msg == "" {
			t.Errorf("line %d: no msg\n%s", i+1, l)
		}
		if _, ok := e["caller"].(string); !ok {
			t.Errorf("line %d: no caller\n%s", i+1, l)
		}
		_, info := e["v"]
		_, hasErr := e["err"]
		if !info && !hasErr {
			t.Errorf("line %d: neither v (info) nor err (error)\n%s", i+1, l)
		}
	}
	if t.Failed() {
		return
	}

	// Lines that must be there, each with its keys as fields.
	for _, want := range []struct {
		msg    string
		fields func(e map[string]any) bool
	}{
		{"Starting handroll", func(e map[string]any) bool { return isString(e["version"]) }},
		{"Using cluster", func(e map[string]any) bool { return isString(e["host"]) && e["qps"] != nil && e["burst"] != nil }},
		{"Caches synced", func(e map[string]any) bool {
			n, ok := e["namespaces"].([]any) // a slice stays a JSON array
			return ok && len(n) == 1 && n[0] == ns
		}},
		{"Became the leader", func(e map[string]any) bool {
			return e["lease"] == opNS+"/handroll-leader" && isString(e["identity"])
		}},
		{"Leading; starting the controllers", func(e map[string]any) bool { return isString(e["identity"]) && e["warmStandby"] == true }},
		{"Starting controller", func(e map[string]any) bool { return e["controller"] == "webapp" }},
		{"Reconcile successful", func(e map[string]any) bool {
			return e["controller"] == "webapp" && equal(e["object"], map[string]any{"name": "web", "namespace": ns}) &&
				isString(e["reconcileID"]) && e["v"] == json.Number("5")
		}},
		// A Reconciler's own line, through klog.FromContext: the
		// controller's keys come with it.
		{"Created the directory", func(e map[string]any) bool {
			return e["controller"] == "directory" && equal(e["object"], map[string]any{"name": "webapp-directory", "namespace": opNS}) &&
				isString(e["reconcileID"]) && e["entries"] == json.Number("1")
		}},
		{"Received a signal; stopping gracefully (send it again to exit at once)", func(e map[string]any) bool { return e["signal"] == "terminated" }},
		{"Released the lease", func(e map[string]any) bool { return e["lease"] == opNS+"/handroll-leader" }},
	} {
		found := false
		for _, e := range entries {
			found = found || (e["msg"] == want.msg && want.fields(e))
		}
		if !found {
			t.Errorf("no line %q with the expected fields", want.msg)
		}
	}
	if last := entries[len(entries)-1]; last["msg"] != "handroll stopped" {
		t.Errorf("last line: %v, want handroll stopped", last)
	}
}

// klogHeader starts every line of klog's text format: severity, date, time,
// thread id, file:line.
var klogHeader = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ :]+\.go:\d+\] `)

// TestTextIsTheDefault: with no --logging-format every line is klog's text
// format, key/value pairs written key="value" after the quoted message.
func TestTextIsTheDefault(t *testing.T) {
	opNS, _, lines := run(t, func(line, ns string) bool {
		return strings.Contains(line, `] "Reconcile successful" controller="webapp" object="`+ns+`/web" reconcileID="`)
	})
	for i, l := range lines {
		if !klogHeader.MatchString(l) {
			t.Errorf("line %d is not in klog's text format:\n%s", i+1, l)
		}
	}
	log := strings.Join(lines, "\n")
	for _, want := range []string{
		`] "Starting handroll" version="`,
		`] "Became the leader" lease="` + opNS + `/handroll-leader" identity="`,
		`] "handroll stopped"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no line with %s", want)
		}
	}
}

// decode parses line as exactly one JSON object, numbers kept as written.
func decode(line string) (map[string]any, error) {
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var e map[string]any
	if err := d.Decode(&e); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more after the object")
	}
	return e, nil
}

func isString(v any) bool { s, ok := v.(string); return ok && s != "" }

// equal reports whether got is a JSON object of exactly want's fields.
func equal(got any, want map[string]any) bool {
	m, ok := got.(map[string]any)
	if !ok || len(m) != len(want) {
		return false
	}
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}
