package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
)

// The release the chart is of: VERSION holds vX.Y.Z, the chart's version is
// X.Y.Z and its appVersion vX.Y.Z.
var appVersion, chartVersion = func() (string, string) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		panic(err)
	}
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		panic(err)
	}
	app := strings.TrimSpace(string(v))
	return app, strings.TrimPrefix(app, "v")
}()

// The namespace manifests/default installs into.
const defaultNamespace = "handroll-system"

// TestChartIsTheRelease checks Chart.yaml against VERSION, and that the
// files the chart reads as data are manifests/' own, byte for byte: the
// generated CRD and the alerts.
func TestChartIsTheRelease(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "charts", "handroll", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Name != "handroll" || chart.Version != chartVersion || chart.AppVersion != appVersion {
		t.Errorf("Chart.yaml: name %q version %q appVersion %q; want handroll, %s and %s (VERSION)",
			chart.Name, chart.Version, chart.AppVersion, chartVersion, appVersion)
	}
	for _, src := range []string{"manifests/crd/handroll.dev_webapps.yaml", "manifests/monitoring/prometheus_rule.yaml"} {
		want, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		copied := "charts/handroll/files/" + filepath.Base(src)
		got, err := os.ReadFile(filepath.Join(root, copied))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not %s: run 'make chart-files' (make generate does too)", copied, src)
		}
	}
}

// TestLint runs helm lint --strict on the defaults and with every optional
// part on.
func TestLint(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"--set", "certManager.enable=true,prometheus.enable=true,networkPolicy.enable=true," + scraperValues(defaultNamespace)},
		{"--set", "prometheus.enable=true," + scraperValues(defaultNamespace)},
		{"--set", "manager.shards=3,manager.logging.format=json,rbacHelpers.enable=false,crd.enable=false"},
	} {
		out, err := run(t, nil, helmPath(t), append([]string{"lint", "--strict", "charts/handroll"}, args...)...)
		if err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestDefaultIsManifestsDefault renders the chart with its defaults into
// manifests/default's namespace and compares every object with
// manifests/default's (hack/deploy.sh render, the image set to the chart's
// default), parsed, after taking away what the chart adds for Helm alone.
// One object differs by design: manifests/default creates its Namespace,
// while a chart is installed into one (helm --create-namespace).
func TestDefaultIsManifestsDefault(t *testing.T) {
	chart := withoutHelm(t, mustTemplate(t, defaultNamespace))
	out, err := run(t, []string{"KUBECTL=" + kubectlPath(t)}, "bash", "hack/deploy.sh", "render", "manifests/default", "ghcr.io/handroll/handroll:"+appVersion)
	if err != nil {
		t.Fatal(err)
	}
	manifests := parse(t, out, "manifests/default")
	ns := "Namespace /" + defaultNamespace
	if _, ok := manifests[ns]; !ok {
		t.Fatalf("manifests/default creates no %s any more: drop the exception here", ns)
	}
	delete(manifests, ns)
	sameObjects(t, chart, manifests, "the chart", "manifests/default")
	if crd := mustTemplate(t, defaultNamespace)["CustomResourceDefinition /webapps.handroll.dev"]; dig(crd, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
		t.Error("the CRD is not kept on uninstall by default (helm.sh/resource-policy: keep)")
	}
}

// TestComponentsAreManifests compares the chart, with the values that turn
// a component of manifests/ on, with manifests/default and that component,
// as their kustomization.yaml files say to write the overlay.
func TestComponentsAreManifests(t *testing.T) {
	img := "ghcr.io/handroll/handroll:" + appVersion
	for _, tc := range []struct {
		name string
		set  string
		// overlay builds the kustomization to compare with.
		overlay func(t *testing.T) string
	}{{
		name: "monitoring",
		set:  "prometheus.enable=true," + scraperValues(defaultNamespace),
		overlay: func(t *testing.T) string {
			return overlay(t, defaultNamespace, img, []string{"manifests/default"}, []string{"manifests/monitoring"})
		},
	}, {
		name: "network-policy",
		set:  "networkPolicy.enable=true",
		overlay: func(t *testing.T) string {
			return overlay(t, defaultNamespace, img, []string{"manifests/default"}, []string{"manifests/network-policy"})
		},
	}, {
		name: "certmanager",
		set:  "certManager.enable=true",
		overlay: func(t *testing.T) string {
			return overlay(t, "", img, []string{"manifests/default"}, []string{"manifests/certmanager"})
		},
	}, {
		// manifests/certmanager, one level above an overlay with
		// manifests/monitoring, as its kustomization.yaml shows.
		name: "certmanager+monitoring",
		set:  "certManager.enable=true,prometheus.enable=true," + scraperValues(defaultNamespace),
		overlay: func(t *testing.T) string {
			install := overlay(t, defaultNamespace, img, []string{"manifests/default"}, []string{"manifests/monitoring"})
			return overlay(t, "", "", []string{install}, []string{"manifests/certmanager"})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(repoRoot(t), "manifests", strings.Split(tc.name, "+")[0])); err != nil {
				t.Skipf("no manifests/%s", tc.name)
			}
			chart := withoutHelm(t, mustTemplate(t, defaultNamespace, "--set", tc.set))
			manifests := kustomize(t, tc.overlay(t))
			delete(manifests, "Namespace /"+defaultNamespace)
			if strings.HasSuffix(tc.name, "monitoring") {
				scraperAsTheChart(t, manifests)
			}
			sameObjects(t, chart, manifests, "the chart with "+tc.set, "manifests/default with manifests/"+tc.name)
		})
	}
}

// scraperValues name, for the chart, the identity manifests/monitoring
// makes for Prometheus (scraper.yaml): the reader binding's subject and
// the Secret holding its token.
func scraperValues(ns string) string {
	return "metrics.reader.subjects[0].kind=ServiceAccount,metrics.reader.subjects[0].name=handroll-metrics-scraper," +
		"metrics.reader.subjects[0].namespace=" + ns + ",prometheus.serviceMonitor.authorization.credentials.name=handroll-metrics-scraper-token"
}

// scraperAsTheChart takes from a build with manifests/monitoring what the
// chart leaves to its user, checking first that it is there: the scraper's
// ServiceAccount and token Secret (the chart names them in values, it does
// not guess an identity), and the ServiceMonitor's serverName, the Service's
// short name in kustomize, which cannot know the namespace when the
// component runs, where the chart names the Service in its namespace.
func scraperAsTheChart(t *testing.T, manifests objects) {
	t.Helper()
	for _, k := range []string{"ServiceAccount " + defaultNamespace + "/handroll-metrics-scraper", "Secret " + defaultNamespace + "/handroll-metrics-scraper-token"} {
		if _, ok := manifests[k]; !ok {
			t.Errorf("manifests/monitoring makes no %s any more: drop the exception here", k)
		}
		delete(manifests, k)
	}
	tlsConfig, _ := dig(manifests["ServiceMonitor "+defaultNamespace+"/handroll"], "spec", "endpoints", 0, "tlsConfig").(map[string]any)
	if tlsConfig["serverName"] == "handroll-metrics" {
		tlsConfig["serverName"] = "handroll-metrics." + defaultNamespace + ".svc"
	}
}
