package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"}

// binaries is a directory holding the control plane's binaries, and kwok's
// stage configs.
type binaries struct {
	dir    string
	stages []string
}

func (b *binaries) path(name string) string { return filepath.Join(b.dir, name) }

// nodeBinaries returns the paths of a real node's kubelet and kube-proxy:
// in the control plane's directory when it has them, else built by
// `hack/testbin.sh node-path` on first use.
func (b *binaries) nodeBinaries() (kubelet, kubeProxy string, err error) {
	dir := b.dir
	if !isExecutable(filepath.Join(dir, "kubelet")) || !isExecutable(filepath.Join(dir, "kube-proxy")) {
		if dir, err = testbin("node-path"); err != nil {
			return "", "", err
		}
	}
	return filepath.Join(dir, "kubelet"), filepath.Join(dir, "kube-proxy"), nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// FindBinaries returns the directory of the control-plane binaries: dir when
// given; else KUBEBUILDER_ASSETS when it holds them all (as envtest does);
// else what `hack/testbin.sh path` prints, which builds them from pinned
// sources on first use.
func FindBinaries(dir string) (*binaries, error) {
	if dir == "" {
		if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" && hasAll(assets) {
			dir = assets
		}
	}
	if dir == "" {
		out, err := testbin("path")
		if err != nil {
			return nil, err
		}
		dir = out
	}
	if !hasAll(dir) {
		return nil, fmt.Errorf("%s does not hold all of %s; run 'make testbin'", dir, strings.Join(binaryNames, ", "))
	}
	b := &binaries{dir: dir}

	stageDir := filepath.Join(dir, "kwok-stages")
	if _, err := os.Stat(stageDir); err != nil {
		if stageDir, err = testbin("stages"); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(stageDir)
	if err != nil {
		return nil, fmt.Errorf("reading kwok's stage configs: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			b.stages = append(b.stages, filepath.Join(stageDir, e.Name()))
		}
	}
	slices.Sort(b.stages)
	if len(b.stages) == 0 {
		return nil, fmt.Errorf("no kwok stage configs in %s", stageDir)
	}
	return b, nil
}

func hasAll(dir string) bool {
	for _, name := range binaryNames {
		if !isExecutable(filepath.Join(dir, name)) {
			return false
		}
	}
	return true
}

// testbin runs hack/testbin.sh with arg and returns the last line it prints.
// Its progress goes to stderr, which a first build needs: it takes minutes.
func testbin(arg string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "testbin.sh"), arg)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/testbin.sh %s: %w", arg, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// RepoRoot finds the handroll checkout from the working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module github.com/handroll/handroll\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no handroll checkout above the working directory")
		}
		dir = parent
	}
}
