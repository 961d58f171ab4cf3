package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit reads the limit as each cgroup layout shows it: v2
// in the process's own cgroup or at a namespaced root, v1's memory
// controller, "max" and v1's huge "no limit" as none, and a layout with no
// memory file as an error that says so.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string
		err   bool
	}{
		{"v2, own cgroup", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
		}, 268435456, "sys/fs/cgroup/kubepods/pod1/c1/memory.max", false},
		{"v2, cgroup namespace", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "134217728\n",
		}, 134217728, "sys/fs/cgroup/memory.max", false},
		{"v2, path not mounted: the mount's root", map[string]string{
			"proc/self/cgroup":         "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory.max": "134217728\n",
		}, 134217728, "sys/fs/cgroup/memory.max", false},
		{"v2, no limit", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0, "sys/fs/cgroup/memory.max", false},
		{"v1", map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n1:name=systemd:/x\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}, 536870912, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", false},
		{"v1, no limit", map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0, "sys/fs/cgroup/memory/memory.limit_in_bytes", false},
		{"no memory file", map[string]string{"proc/self/cgroup": "0::/\n"}, 0, "", true},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, 0, "sys/fs/cgroup/memory.max", true},
	} {
		root := t.TempDir()
		for name, content := range tc.files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, from, err := cgroupMemoryLimit(root)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
		if want := filepath.Join(root, tc.from); tc.from != "" && from != want {
			t.Errorf("%s: read from %s, want %s", tc.name, from, want)
		}
	}
}
