// Package chart checks the Helm chart, charts/handroll, with the real helm
// (helm.sh/helm/v4, pinned in hack/tools and built by `make helm`): `helm
// lint --strict`; that its default rendering is manifests/default object
// for object, and with a component's values manifests/default with that
// component; what each notable combination of values must change; that
// `make chart-package` writes the same bytes twice; and, against a real
// kube-apiserver, that helm installs, upgrades and uninstalls it (the CRD
// kept unless crd.keep=false), with the optional parts too (the Prometheus
// Operator's and cert-manager's kinds from stand-in CRDs), that `make
// install` and `make uninstall` put in and take out the CRD alone, and
// whose fields make install and make deploy take (owners_test.go, with a
// kwok node for make deploy's rollout and make undeploy). It replaces
// nothing of the Manager: it is the chart's test, as test/manifests is the
// kustomize manifests'.
package chart
