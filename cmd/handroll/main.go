package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// version is set at link time by the Makefile (-ldflags -X main.version=...).
var version = "v0.0.0-dev"

// options are the command-line flags. Their names follow the kube-* binaries
// so that an operator of kube-controller-manager finds them where expected.
type options struct {
	kubeconfig  string
	showVersion bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path to a kubeconfig file. Empty: the KUBECONFIG environment variable, then the in-cluster configuration, then ~/.kube/config.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and Go build information, then exit.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and runs the operator; it returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("handroll", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "handroll runs the WebApp operator (group handroll.dev).\n\nUsage:\n  handroll [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}

	var o options
	o.addFlags(fs)
	addKlogFlags(fs)
	// kube binaries accept --log_dir and --log-dir alike.
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "handroll: %v\nRun 'handroll --help' for the flags.\n", err)
		return 2
	}
	if o.showVersion {
		printVersion(stdout)
		return 0
	}

	klog.InfoS("Starting handroll", "version", version)
	klog.ErrorS(nil, "The start sequence is not assembled yet; nothing to run")
	return 1
}

// addKlogFlags adds klog's -v and --vmodule, the two logging flags the kube
// binaries expose; klog's file-output flags stay hidden behind their defaults
// (log to stderr), which is what a container or a terminal wants.
func addKlogFlags(fs *pflag.FlagSet) {
	all := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(all)
	for _, name := range []string{"v", "vmodule"} {
		pf := pflag.PFlagFromGoFlag(all.Lookup(name))
		if name == "v" {
			pf.Shorthand = "v"
		}
		fs.AddFlag(pf)
	}
}

// printVersion prints the version and what the Go toolchain recorded about
// this binary: the toolchain, the platform and, when built from a checkout,
// the revision.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "handroll %s\n", version)
	fmt.Fprintf(w, "  go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "  module:   %s %s\n", bi.Main.Path, bi.Main.Version)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "CGO_ENABLED", "-trimpath":
			fmt.Fprintf(w, "  %-9s %s\n", s.Key+":", s.Value)
		}
	}
}
