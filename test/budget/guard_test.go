package budget

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoTestBudgetCoversABuildOrAStart keeps the rules that let the suite
// pass on a busy machine: a test never starts a control plane inside its
// own deadline (controlplane.StartForTest, StartWithBudget and RunTests
// give the start a budget of its own), a package that runs the operator
// builds it in TestMain before any test, and the deadlines under test/ go
// through this package.
func TestNoTestBudgetCoversABuildOrAStart(t *testing.T) {
	root := moduleRoot(t)
	runsOperator := regexp.MustCompile(`\boperator\.(Start|Launch|LaunchInPod|Binary|Handroll)\(`)
	perDir := map[string][]string{} // package directory → its _test.go files' contents
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// Other modules, what is not source, and this package, whose
			// test names what it looks for.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || fileExists(filepath.Join(path, "go.mod")) || rel == filepath.Join("test", "budget")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(data)
		perDir[filepath.Dir(rel)] = append(perDir[filepath.Dir(rel)], src)
		if !strings.HasPrefix(rel, "test/controlplane/") && strings.Contains(src, "controlplane.Start(") {
			t.Errorf("%s: controlplane.Start inside a test's deadline; use controlplane.StartForTest or StartWithBudget", rel)
		}
		if strings.HasPrefix(rel, "test/") && strings.Contains(src, "context.WithTimeout(") {
			t.Errorf("%s: context.WithTimeout; use budget.Context, which %s scales and whose expiry says what it waited for", rel, Var)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range perDir {
		all := strings.Join(files, "\n")
		if runsOperator.MatchString(all) && !strings.Contains(all, "operator.BuildBeforeTests()") {
			t.Errorf("%s runs the operator but its TestMain does not call operator.BuildBeforeTests: a test would pay for the build", dir)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(data, []byte("module github.com/handroll/handroll\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no handroll checkout above the working directory")
		}
		dir = parent
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
