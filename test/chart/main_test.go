package chart

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/operator"
)

// The uninstall and conversion tests run handroll: it is built before the
// tests, so that no test's budget pays for the build.
func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := m.Run()
	remove()
	os.Exit(code)
}
