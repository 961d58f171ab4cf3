//go:build race

package examples

func init() { buildFlags = append(buildFlags, "-race") }
