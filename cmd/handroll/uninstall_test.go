package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUninstallFlags: `handroll uninstall` has its own flags, listed by its
// --help and by the operator's usage, and refuses before touching the
// cluster a flag value that cannot work, naming the flag. What it does to
// a cluster is test/chart's TestUninstallCommand, on a real API server.
func TestUninstallFlags(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"uninstall", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("uninstall --help: code %d", code)
	}
	for _, flag := range []string{"--operator-namespace", "--deployment", "--leader-elect-resource-name", "--webhook-secret-name", "--delete-webapps", "--force-finalizers", "--timeout"} {
		if !strings.Contains(errOut.String(), flag) {
			t.Errorf("uninstall --help does not list %s", flag)
		}
	}
	// helm uninstall, make undeploy and this keep the WebApps unless asked.
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, "--delete-webapps") && strings.Contains(line, "default true") {
			t.Errorf("--delete-webapps is on by default: %s", line)
		}
	}
	errOut.Reset()
	if run([]string{"--help"}, &out, &errOut); !strings.Contains(errOut.String(), "handroll uninstall") {
		t.Errorf("the operator's --help does not name the uninstall subcommand:\n%s", errOut.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"uninstall", "--timeout=0s"}, "--timeout must be positive"},
		{[]string{"uninstall", "--timeout=-1m"}, "--timeout must be positive"},
		{[]string{"uninstall", "--shards=3"}, "unknown flag: --shards"},
		{[]string{"uninstall", "now"}, `unexpected arguments ["now"]`},
	} {
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: code %d, stderr %q; want code 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestHeldMessageNamesAHundred: at scale the failure names the first
// WebApps left and counts the rest, so that helm's print of the Job's log
// stays readable; the advice still covers every WebApp left.
func TestHeldMessageNamesAHundred(t *testing.T) {
	left := make([]heldWebApp, 250)
	for i := range left {
		left[i] = heldWebApp{namespace: "team-a", name: fmt.Sprintf("app-%03d", i)}
	}
	left[200].others = []string{"backup.example.com/protect"}
	msg := heldMessage(t.Context(), nil, left, time.Minute)
	for _, want := range []string{"250 WebApp(s) still there after 1m0s", "team-a/app-099 (being deleted)", "\n  and 150 more", "--force-finalizers"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "app-100") {
		t.Errorf("the message names more than %d WebApps:\n%s", heldNamed, msg)
	}
}
