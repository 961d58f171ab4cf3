// Command manifest reads and writes the YAML that make's install targets
// handle, with a YAML parser rather than line patterns, so that comments,
// "---" inside strings and block scalars, lists of objects and CRLF line
// ends mean what they mean to the API server and to helm.
//
//	manifest chart-image IMG VALUES_YAML
//	    Set the chart's default image in VALUES_YAML (a copy of
//	    charts/handroll/values.yaml; make chart-package CHART_IMG=...):
//	    manager.image.repository, .tag and .digest. Only those values'
//	    bytes change: comments, order and layout are kept.
//	manifest kustomization --base DIR --image IMG OUT_DIR
//	    Write OUT_DIR/kustomization.yaml: DIR with the operator's image set
//	    to IMG, as `kustomize edit set image handroll=IMG` would
//	    (hack/deploy.sh).
//	manifest select [--kind KIND]... [--except-kind KIND]... FILE
//	    Print the objects of the multi-document YAML FILE ("-": stdin) of
//	    the given kinds, or of all kinds but the excepted ones, one per
//	    document. A List, or a document that is a bare sequence, counts as
//	    its items.
//	manifest namespace --kind KIND --name NAME FILE
//	    Print the namespace of the one object KIND/NAME in FILE.
//
// IMG is name[:tag][@sha256:digest]; the name may begin with a registry
// host and port (registry.example:5000/team/handroll).
package main

import (
	"errors"
	"fmt"
	"os"
)

// errUsage asks for the usage text and exit status 2.
var errUsage = errors.New("usage")

const usage = `usage:
  manifest chart-image IMG VALUES_YAML
  manifest kustomization --base DIR --image IMG OUT_DIR
  manifest select [--kind KIND]... [--except-kind KIND]... FILE
  manifest namespace --kind KIND --name NAME FILE`

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "manifest: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "chart-image":
		return runChartImage(args)
	case "kustomization":
		return runKustomization(args)
	case "select":
		return runSelect(args, os.Stdout)
	case "namespace":
		return runNamespace(args, os.Stdout)
	default:
		return errUsage
	}
}
