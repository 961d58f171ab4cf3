package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSupported(t *testing.T) {
	for _, tc := range []struct {
		name, file, err string
		oldest          string
		allowed         []string // version/NAME
	}{
		{name: "oldest and an allowance",
			file:   "# comment\n\noldest v0.1.0\nallow v0.1.0 webhook-connections-closed-on-stop\n",
			oldest: "v0.1.0", allowed: []string{"v0.1.0/webhook-connections-closed-on-stop"}},
		{name: "no oldest", file: "allow v0.1.0 webhook-connections-closed-on-stop\n", err: "names no oldest"},
		{name: "two oldest", file: "oldest v0.1.0\noldest v0.2.0\n", err: ":2:"},
		{name: "a pre-release", file: "oldest v0.3.0-dev\n", err: ":1:"},
		{name: "an unknown defect", file: "oldest v0.1.0\nallow v0.1.0 slow-start\n", err: ":2:"},
		{name: "the old format", file: "4b0a3c13f04b8a4b5f8419559fe2d974aa6dc950\nallow webhook-connections-closed-on-stop\n", err: ":1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "supported")
			if err := os.WriteFile(file, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := ReadSupported(file)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadSupported = %+v, %v; want an error with %q", s, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Oldest != tc.oldest {
				t.Errorf("oldest %q, want %q", s.Oldest, tc.oldest)
			}
			n := 0
			for v, names := range s.Allowances {
				n += len(names)
				for name := range names {
					found := false
					for _, a := range tc.allowed {
						found = found || a == v+"/"+name
					}
					if !found {
						t.Errorf("allows %s/%s, want only %v", v, name, tc.allowed)
					}
				}
			}
			if n != len(tc.allowed) {
				t.Errorf("%d allowances, want %v", n, tc.allowed)
			}
		})
	}
}

// TestTheSupportedFileReads: test/upgrade/supported, which the upgrade
// tests read only under make test-upgrade and make test-real, parses.
func TestTheSupportedFileReads(t *testing.T) {
	if _, err := ReadSupported(filepath.Join("..", "upgrade", "supported")); err != nil {
		t.Fatal(err)
	}
}
