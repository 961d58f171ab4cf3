package v1

import (
	"fmt"
	"regexp"
	"strings"
)

// The grammar of an image reference, as the container registries and
// container runtimes parse it (the distribution project's reference grammar):
//
//	reference  := name [ ":" tag ] [ "@" digest ]
//	name       := [ domain "/" ] path-component [ "/" path-component ]*
//	domain     := host [ ":" port ]
//	tag        := [\w][\w.-]{0,127}
//	digest     := algorithm ":" hex (at least 32 hex digits)
//
// Path components are lower case; only the domain may carry upper case, dots
// or a port. Writing the grammar out, rather than matching "no spaces", lets
// admission reject "nginx:" or "Nginx" before a pod sits in ImagePullBackOff.
const (
	refAlnum          = `[a-z0-9]+`
	refSeparator      = `(?:[._]|__|[-]+)`
	refPathComponent  = refAlnum + `(?:` + refSeparator + refAlnum + `)*`
	refDomainComp     = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refIPv6           = `\[(?:[a-fA-F0-9:]+)\]`
	refHost           = `(?:` + refDomainComp + `(?:\.` + refDomainComp + `)*|` + refIPv6 + `)`
	refDomain         = refHost + `(?::[0-9]+)?`
	refTag            = `[\w][\w.-]{0,127}`
	refDigest         = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	refNameTotalLimit = 255
)

var (
	pathRE   = regexp.MustCompile(`^` + refPathComponent + `(?:/` + refPathComponent + `)*$`)
	domainRE = regexp.MustCompile(`^` + refDomain + `$`)
	tagRE    = regexp.MustCompile(`^` + refTag + `$`)
	digestRE = regexp.MustCompile(`^` + refDigest + `$`)
)

// ValidateImageReference reports why s is not a valid image reference, or
// nil when it is. It accepts what a container runtime pulls: "nginx",
// "nginx:1.27", "example.com:5000/team/app:v1", "app@sha256:<64 hex>".
func ValidateImageReference(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("must not contain white space")
	}

	rest := s
	if at := strings.IndexByte(rest, '@'); at >= 0 {
		digest := rest[at+1:]
		if !digestRE.MatchString(digest) {
			return fmt.Errorf("digest %q must be <algorithm>:<hex>, for example sha256: followed by 64 hex digits", digest)
		}
		rest = rest[:at]
	}

	// A colon after the last slash starts the tag; a colon before it belongs
	// to the domain's port.
	name := rest
	if colon := strings.LastIndexByte(rest, ':'); colon > strings.LastIndexByte(rest, '/') {
		tag := rest[colon+1:]
		if !tagRE.MatchString(tag) {
			return fmt.Errorf("tag %q must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", tag)
		}
		name = rest[:colon]
	}
	if name == "" {
		return fmt.Errorf("must name a repository before the tag or digest")
	}
	if len(name) > refNameTotalLimit {
		return fmt.Errorf("repository name must be at most %d characters", refNameTotalLimit)
	}

	path := name
	if slash := strings.IndexByte(name, '/'); slash >= 0 && isDomain(name[:slash]) {
		if !domainRE.MatchString(name[:slash]) {
			return fmt.Errorf("registry host %q is not a valid host[:port]", name[:slash])
		}
		path = name[slash+1:]
	}
	if !pathRE.MatchString(path) {
		return fmt.Errorf("repository %q must be lower case letters and digits, separated by '/', '.', '_', '__' or '-'", path)
	}
	return nil
}

// isDomain tells whether the first component of a name is a registry host,
// with the same rule as container runtimes: it holds a '.' or a ':', is
// "localhost", or has upper case letters (which a path may not).
func isDomain(first string) bool {
	return strings.ContainsAny(first, ".:[") || first == "localhost" || strings.ToLower(first) != first
}
