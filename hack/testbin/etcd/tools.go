//go:build tools

// Package tools names the command hack/testbin.sh builds, so that go mod tidy
// keeps every module it needs. It is never compiled.
package tools

import (
	_ "go.etcd.io/etcd/server/v3" // etcd's main package is the module root
)
