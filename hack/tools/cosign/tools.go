//go:build tools

// Package tools pins cosign (sigstore), which signs and verifies
// releases, in a module of its own: its dependencies would move those of
// the tools in hack/tools.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
