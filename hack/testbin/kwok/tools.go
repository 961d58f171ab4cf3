//go:build tools

// Package tools names the command hack/testbin.sh builds, so that go mod tidy
// keeps every module it needs. It is never compiled.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
