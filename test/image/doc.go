// Package image proves that `make image` (the hack/image module) builds the
// handroll image reproducibly and as described: two builds from the same
// binaries give byte-identical OCI archives with the same index digest; the
// index holds exactly a linux/amd64 and a linux/arm64 image; each runs its
// one file, /handroll, as 65532:65532 with no Cmd and no Env, and that file
// holds exactly the bytes of the binary given for its platform; and the
// archive's index.json names the image for containerd and by its tag.
//
// The binaries are stand-ins (a few hundred KiB of fixed pseudo-random bytes
// per platform) rather than two builds of cmd/handroll, which would take
// minutes: the tool copies bytes, and the test compares bytes.
package image
