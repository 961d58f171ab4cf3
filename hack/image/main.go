// Command image builds a multi-platform OCI image from static binaries,
// without a container engine: `make image`, `make image-pause` and `make
// image-demo` run it.
//
//	go -C hack/image run . \
//	  --binary linux/amd64=bin/handroll-linux-amd64 \
//	  --binary linux/arm64=bin/handroll-linux-arm64 \
//	  --name handroll --tag localhost/handroll:dev --out .local/image/handroll.tar
//
// There is no base image: each platform's image has one layer holding the
// binary at /NAME (mode 0755, owner 0:0), and a config that runs it as
// 65532:65532 with Entrypoint ["/NAME"], no Cmd and no Env. The output is an
// OCI image layout packed in a tar (an "oci-archive") that `ctr images
// import --all-platforms` reads; its index.json entry is annotated with the
// full tag (io.containerd.image.name, which containerd names the image
// after) and the tag part (org.opencontainers.image.ref.name).
//
// The build is reproducible: the same binaries, name, tag and --created give
// the same bytes and the same index digest. Every timestamp (config,
// history, the layer's tar header, the archive's tar headers) is --created,
// by default SOURCE_DATE_EPOCH or else the Unix epoch; layers are gzip at a
// fixed level with an empty gzip header; the archive's entries are sorted.
//
// The index digest (sha256:...) is printed as the last line and written to
// OUT.digest.
//
// --title, --version, --revision, --source and --licenses set the OCI
// annotations of the same names (org.opencontainers.image.*), as labels in
// each image's config and as annotations on the index; with any of them,
// org.opencontainers.image.created is --created too. They are inputs like
// the others: the same values give the same digest.
//
// `image push --archive OUT --tag REF [--insecure]` pushes the archive's
// index to a registry (push.go) and prints the pushed digest last.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run is `image push ...` or, without a subcommand, the build.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "push" {
		return pushMain(ctx, args[1:], stdout)
	}
	return buildMain(args, stdout)
}

func buildMain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var binaries []Binary
	fs.Func("binary", "os/arch=PATH of a static binary; repeat for each platform", func(s string) error {
		b, err := ParseBinary(s)
		if err != nil {
			return err
		}
		binaries = append(binaries, b)
		return nil
	})
	fileName := fs.String("name", "handroll", "the binary's file name in the image (at /NAME, the entrypoint)")
	ref := fs.String("tag", "localhost/handroll:dev", "the full image reference: registry-host/repository:tag")
	out := fs.String("out", ".local/image/handroll.tar", "the OCI archive to write; the digest goes to OUT.digest")
	created := fs.String("created", "", "the time (RFC 3339) on every timestamp in the image (default: SOURCE_DATE_EPOCH, else the Unix epoch)")
	var labels Labels
	fs.StringVar(&labels.Title, "title", "", "label "+LabelTitle)
	fs.StringVar(&labels.Version, "version", "", "label "+LabelVersion)
	fs.StringVar(&labels.Revision, "revision", "", "label "+LabelRevision+": the commit the binaries were built from")
	fs.StringVar(&labels.Source, "source", "", "label "+LabelSource)
	fs.StringVar(&labels.Licenses, "licenses", "", "label "+LabelLicenses+": an SPDX license expression")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *fileName == "" || *fileName != filepath.Base(*fileName) || *fileName == "." || *fileName == ".." {
		return fmt.Errorf("--name %q: want a plain file name", *fileName)
	}
	full, tag, err := ParseTag(*ref)
	if err != nil {
		return err
	}
	at, err := CreatedTime(*created, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}

	idx, err := Index(binaries, *fileName, at, labels.Map(at))
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := WriteArchive(&buf, idx, map[string]string{
		AnnotationContainerdName: full,
		AnnotationRefName:        tag,
	}, at); err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := writeFile(*out, buf.Bytes()); err != nil {
		return err
	}
	if err := writeFile(*out+".digest", []byte(digest.String()+"\n")); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image: %s (%s, %d bytes, created %s) in %s\n", full, platforms(binaries), buf.Len(), at.Format("2006-01-02T15:04:05Z07:00"), *out)
	fmt.Fprintln(stdout, digest.String())
	return nil
}

// writeFile replaces path whole: a reader never sees half an archive.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func platforms(bs []Binary) string {
	s := ""
	for i, b := range bs {
		if i > 0 {
			s += ", "
		}
		s += b.Platform.String()
	}
	return s
}
