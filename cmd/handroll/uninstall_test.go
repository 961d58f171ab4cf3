package main

import (
	"strings"
	"testing"
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
