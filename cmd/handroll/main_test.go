package main

import (
	"strings"
	"testing"
)

// TestLoggingFlags: component-base's logging flags are there, -v keeps its
// shorthand and `_` still reads as `-`, and a value the logging API refuses
// exits with code 2 and a message naming the flag, before anything starts.
// The refused values never reach the apply, which a process may do once.
func TestLoggingFlags(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help: code %d", code)
	}
	for _, flag := range []string{"--logging-format", "-v, --v", "--vmodule", "--log-flush-frequency", "--log-json-split-stream", "--log-json-info-buffer-size", "--feature-gates", "LoggingAlphaOptions"} {
		if !strings.Contains(errOut.String(), flag) {
			t.Errorf("--help does not list %s", flag)
		}
	}
	// --version returns before the logging configuration is applied.
	for _, args := range [][]string{{"-v=4"}, {"-v", "4"}, {"--v=4"}, {"--vmodule=start=4"}, {"--logging-format=json"}, {"--log_flush_frequency=1s"}} {
		out.Reset()
		errOut.Reset()
		if code := run(append(args, "--version"), &out, &errOut); code != 0 {
			t.Errorf("%q: code %d, stderr %q", args, code, errOut.String())
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--logging-format=xml"}, `handroll: --logging-format: Invalid value: "xml": Unsupported log format`},
		{[]string{"--logging-format=json", "--vmodule=start=4"}, "handroll: --vmodule: Forbidden: Only supported for text log format"},
		{[]string{"--log_flush_frequency=0"}, "handroll: --log-flush-frequency: Invalid value"},
		{[]string{"--logging-format=json", "--log-json-split-stream"}, "handroll: --log-json-split-stream: Forbidden"},
		{[]string{"--feature-gates=NoSuchGate=true"}, "unrecognized feature gate: NoSuchGate"},
	} {
		out.Reset()
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: code %d, stderr %q; want code 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}
