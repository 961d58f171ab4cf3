//go:build tools

// Package tools pins the code generators' versions in go.mod.
package tools

import (
	_ "k8s.io/code-generator"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
