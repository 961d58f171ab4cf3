package controlplane

import (
	"slices"
	"testing"
)

// The cleanup deletes a kubelet's jump rules by their -S form: quoted
// comments must stay one argument.
func TestSplitRule(t *testing.T) {
	got := splitRule(`-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP`)
	want := []string{"-A", "KUBE-FIREWALL", "!", "-s", "127.0.0.0/8", "-d", "127.0.0.0/8", "-m", "comment", "--comment", "block incoming localnet connections", "-j", "DROP"}
	if !slices.Equal(got, want) {
		t.Errorf("splitRule:\n got %q\nwant %q", got, want)
	}
}

// Every drop of the guard carries a comment, which is how GuardCounters
// tells them apart.
func TestGuardRulesAreNamed(t *testing.T) {
	drops := 0
	for _, r := range guardRules() {
		if r[len(r)-1] != "DROP" {
			continue
		}
		drops++
		i := slices.Index(r, "--comment")
		if i < 0 || i+1 >= len(r) || r[i+1] == "" {
			t.Errorf("a drop rule has no comment: %q", r)
		}
	}
	if drops < 5 {
		t.Errorf("%d drop rules, want the four of the pod network's chain and the host's", drops)
	}
}
