//go:build tools

// Package tools pins the versions of the code generators, the linter and
// helm in go.mod.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "helm.sh/helm/v4/cmd/helm"
	_ "k8s.io/code-generator"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
