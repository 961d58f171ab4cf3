package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// memoryLimitShare is the part of the container's memory limit the Go
// runtime's soft limit is set to: the rest is headroom for what the
// runtime does not count (thread stacks beyond goroutines, cgo, the page
// cache of files it writes) so that the garbage collector works harder
// before the kernel's OOM killer does.
const memoryLimitShare = 0.9

// unlimited is where cgroup v1 reports no limit (PAGE_COUNTER_MAX, page
// aligned); anything this large is none.
const unlimited = 1 << 62

// setMemoryLimit gives the Go runtime a soft memory limit of
// memoryLimitShare of the memory limit of the cgroup this process runs in
// (a container's resources.limits.memory), unless GOMEMLIMIT is set, which
// the runtime has read already and which wins. Go sets GOMAXPROCS from the
// CPU limit itself (Go 1.25); it does nothing of the kind for memory. With
// no limit, or none that can be read, it changes nothing and says why.
func setMemoryLimit(root string) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		klog.InfoS("Memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit, where, err := cgroupMemoryLimit(root)
	switch {
	case err != nil:
		klog.InfoS("No memory limit read; the Go runtime keeps none", "reason", err.Error())
	case limit <= 0:
		klog.V(2).InfoS("No container memory limit; the Go runtime keeps none", "cgroup", where)
	default:
		soft := int64(float64(limit) * memoryLimitShare)
		debug.SetMemoryLimit(soft)
		klog.InfoS("Memory limit from the container's", "goMemLimitBytes", soft, "containerLimitBytes", limit, "cgroup", where)
	}
}

// cgroupMemoryLimit is the memory limit of this process's cgroup, read
// under root (the file system root: "/" but in tests), and the file it
// came from; 0 when the cgroup sets none. Version 2 is read from
// memory.max, version 1 from memory.limit_in_bytes, each in the cgroup
// /proc/self/cgroup names and, where that path is not mounted (a cgroup
// namespace, or a container that mounts only its own cgroup), at the
// mount's root.
func cgroupMemoryLimit(root string) (int64, string, error) {
	self, err := os.ReadFile(path.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", err
	}
	var candidates []string
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates,
				path.Join(root, "sys/fs/cgroup", parts[2], "memory.max"),
				path.Join(root, "sys/fs/cgroup/memory.max"))
		case hasController(parts[1], "memory"):
			candidates = append(candidates,
				path.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"),
				path.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
		}
	}
	for _, file := range candidates {
		limit, err := readLimit(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return limit, file, err
	}
	return 0, "", errors.New("no cgroup memory limit file found")
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit parses a cgroup memory limit file: a byte count, or "max".
func readLimit(file string) (int64, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if n >= unlimited || n > math.MaxInt64 {
		return 0, nil
	}
	return int64(n), nil
}
