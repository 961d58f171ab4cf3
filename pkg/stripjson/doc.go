// Package stripjson removes what handroll's caches never keep from a
// WebApp's JSON before it is decoded: metadata.managedFields and kubectl's
// last-applied-configuration annotation, of one object or of each item of
// a list. A watch event then costs the decode of what is kept only.
//
// Manager piece replaced: none; controller-runtime's cache drops
// managedFields in its DefaultTransform, after the object has been
// decoded whole. handroll still does that too (pkg/cache StripForCache),
// for objects this package leaves as they are.
package stripjson
