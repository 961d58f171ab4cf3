package chart

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	deploymentKey = "Deployment " + defaultNamespace + "/handroll"
	crdKey        = "CustomResourceDefinition /webapps.handroll.dev"
	mwcKey        = "MutatingWebhookConfiguration /handroll"
	vwcKey        = "ValidatingWebhookConfiguration /handroll"
)

// container is the Deployment's manager container.
func container(t *testing.T, objs objects) map[string]any {
	t.Helper()
	c, ok := dig(objs[deploymentKey], "spec", "template", "spec", "containers", 0).(map[string]any)
	if !ok {
		t.Fatalf("no manager container in %s", deploymentKey)
	}
	return c
}

func args(t *testing.T, objs objects) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, objs)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// defaultArgs are manifests/default's.
var defaultArgs = []string{"--metrics-bind-address=:8443", "--metrics-secure", "--health-probe-bind-address=:8081", "--webhook-port=9443", "--metrics-ca-configmap=handroll-ca"}

// fileCertArgs are the args with certificates from files, where the
// operator has no CA of its own to publish.
var fileCertArgs = []string{"--metrics-bind-address=:8443", "--metrics-secure", "--health-probe-bind-address=:8081", "--webhook-port=9443"}

func wantArgs(t *testing.T, objs objects, want ...string) {
	t.Helper()
	if d := cmp.Diff(want, args(t, objs)); d != "" {
		t.Errorf("manager args (-want +got):\n%s", d)
	}
}

func present(t *testing.T, objs objects, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := objs[k]; !ok {
			t.Errorf("%s is missing; the rendering has %v", k, objs.keys())
		}
	}
}

func absent(t *testing.T, objs objects, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := objs[k]; ok {
			t.Errorf("%s is rendered, and should not be", k)
		}
	}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

var webhookCertRBAC = []string{
	"Role " + defaultNamespace + "/handroll-webhook-certs",
	"RoleBinding " + defaultNamespace + "/handroll-webhook-certs",
	"ClusterRole /handroll-webhook-certs",
	"ClusterRoleBinding /handroll-webhook-certs",
}

// valuesCABundle is any base64: the API server does not parse it until it calls.
const valuesCABundle = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="

// valuesDigest is any image digest of the right form.
var valuesDigest = "sha256:" + strings.Repeat("ab", 32)

// valueCase is one combination of values and what it must render.
type valueCase struct {
	name  string
	args  []string
	check func(t *testing.T, objs objects)
}

// managerValueCases set the manager's image, scheduling and flags.
var managerValueCases = []valueCase{{
	name: "image by digest, pull secrets, pull policy",
	args: []string{"--set", "manager.image.repository=registry.invalid:5000/team/handroll,manager.image.tag=ignored,manager.image.digest=" + valuesDigest,
		"--set", "manager.imagePullSecrets[0].name=regcred,manager.image.pullPolicy=Always"},
	check: func(t *testing.T, objs objects) {
		equal(t, "image", container(t, objs)["image"], "registry.invalid:5000/team/handroll@"+valuesDigest)
		equal(t, "imagePullPolicy", container(t, objs)["imagePullPolicy"], "Always")
		equal(t, "imagePullSecrets", dig(objs[deploymentKey], "spec", "template", "spec", "imagePullSecrets"), []any{map[string]any{"name": "regcred"}})
	},
}, {
	name: "image tag",
	args: []string{"--set", "manager.image.repository=registry.invalid/handroll,manager.image.tag=v9.9.9"},
	check: func(t *testing.T, objs objects) {
		equal(t, "image", container(t, objs)["image"], "registry.invalid/handroll:v9.9.9")
	},
}, {
	name: "scheduling and resources",
	args: []string{"--set", "manager.replicas=3,manager.nodeSelector.disk=ssd,manager.tolerations[0].key=dedicated,manager.tolerations[0].operator=Exists",
		"--set", "manager.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone",
		"--set", "manager.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
		"--set", "manager.resources.requests.cpu=1,manager.resources.limits.memory=1Gi"},
	check: func(t *testing.T, objs objects) {
		pod := dig(objs[deploymentKey], "spec", "template", "spec")
		equal(t, "replicas", dig(objs[deploymentKey], "spec", "replicas"), 3.0)
		equal(t, "nodeSelector", dig(pod, "nodeSelector"), map[string]any{"disk": "ssd"})
		equal(t, "tolerations", dig(pod, "tolerations"), []any{map[string]any{"key": "dedicated", "operator": "Exists"}})
		equal(t, "affinity key", dig(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 0, "key"), "zone")
		equal(t, "resources", container(t, objs)["resources"], map[string]any{
			"requests": map[string]any{"cpu": 1.0, "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}})
		present(t, objs, "PodDisruptionBudget "+defaultNamespace+"/handroll")
	},
}, {
	name: "one replica: no PodDisruptionBudget",
	args: []string{"--set", "manager.replicas=1"},
	check: func(t *testing.T, objs objects) {
		absent(t, objs, "PodDisruptionBudget "+defaultNamespace+"/handroll")
	},
}, {
	name: "shards=3 with leader election",
	args: []string{"--set", "manager.shards=3"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, append(slices.Clone(defaultArgs), "--shards=3")...)
	},
}, {
	name: "one replica without leader election",
	args: []string{"--set", "manager.replicas=1,manager.leaderElection.enable=false"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, append(slices.Clone(defaultArgs), "--leader-elect=false")...)
	},
}, {
	name: "json logs, verbosity, extra flags",
	args: []string{"--set", "manager.logging.format=json,manager.logging.verbosity=2,manager.extraArgs[0]=--max-concurrent-reconciles=8"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, append(slices.Clone(defaultArgs), "--logging-format=json", "-v=2", "--max-concurrent-reconciles=8")...)
	},
}}

// metricsValueCases set how metrics are served, scraped and reached.
var metricsValueCases = []valueCase{{
	name: "metrics over HTTP with a ServiceMonitor",
	args: []string{"--set", "metrics.secure=false,metrics.port=8080,prometheus.enable=true,prometheus.serviceMonitor.labels.release=kps,prometheus.serviceMonitor.interval=30s"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-port=9443")
		sm := objs["ServiceMonitor "+defaultNamespace+"/handroll"]
		equal(t, "ServiceMonitor endpoint", dig(sm, "spec", "endpoints", 0), map[string]any{
			"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"})
		equal(t, "ServiceMonitor release label", dig(sm, "metadata", "labels", "release"), "kps")
		equal(t, "metrics Service port", dig(objs["Service "+defaultNamespace+"/handroll-metrics"], "spec", "ports", 0, "port"), 8080.0)
		equal(t, "metrics container port", dig(container(t, objs), "ports", 0), map[string]any{"name": "metrics", "containerPort": 8080.0})
		absent(t, objs, "ClusterRoleBinding /handroll-metrics-reader")
	},
}, {
	name: "metrics secure with a ServiceMonitor",
	args: []string{"--set", "prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=prometheus-token",
		"--set", "metrics.reader.subjects[0].kind=ServiceAccount,metrics.reader.subjects[0].name=prometheus,metrics.reader.subjects[0].namespace=observability"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, defaultArgs...)
		sm := objs["ServiceMonitor "+defaultNamespace+"/handroll"]
		equal(t, "scheme", dig(sm, "spec", "endpoints", 0, "scheme"), "https")
		equal(t, "bearerTokenFile", dig(sm, "spec", "endpoints", 0, "bearerTokenFile"), nil)
		equal(t, "authorization", dig(sm, "spec", "endpoints", 0, "authorization"), map[string]any{
			"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}})
		equal(t, "tlsConfig", dig(sm, "spec", "endpoints", 0, "tlsConfig"), map[string]any{
			"ca":         map[string]any{"configMap": map[string]any{"name": "handroll-ca", "key": "ca.crt"}},
			"serverName": "handroll-metrics." + defaultNamespace + ".svc"})
		equal(t, "metrics reader subject", dig(objs["ClusterRoleBinding /handroll-metrics-reader"], "subjects"), []any{
			map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "observability"}})
		equal(t, "the CA ConfigMap's grants", dig(objs["Role "+defaultNamespace+"/handroll-webhook-certs"], "rules"), []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"create"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "resourceNames": []any{"handroll-webhook-tls"}, "verbs": []any{"get", "list", "watch", "update"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"create"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"handroll-ca"}, "verbs": []any{"get", "update"}}})
	},
}, {
	// No subjects: no binding rather than a guess at who Prometheus
	// is; NOTES.txt says what to set (TestNotesNameTheReaderSubjects).
	name: "a ServiceMonitor without reader subjects",
	args: []string{"--set", "prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=t"},
	check: func(t *testing.T, objs objects) {
		present(t, objs, "ServiceMonitor "+defaultNamespace+"/handroll", "ClusterRole /handroll-metrics-reader")
		absent(t, objs, "ClusterRoleBinding /handroll-metrics-reader")
	},
}, {
	// Any scraper, not only Prometheus: the binding follows the
	// subjects, with or without a ServiceMonitor.
	name: "reader subjects without a ServiceMonitor",
	args: []string{"--set", "metrics.reader.subjects[0].kind=Group,metrics.reader.subjects[0].name=observers,metrics.reader.subjects[0].apiGroup=rbac.authorization.k8s.io"},
	check: func(t *testing.T, objs objects) {
		absent(t, objs, "ServiceMonitor "+defaultNamespace+"/handroll")
		equal(t, "metrics reader subject", dig(objs["ClusterRoleBinding /handroll-metrics-reader"], "subjects"), []any{
			map[string]any{"kind": "Group", "name": "observers", "apiGroup": "rbac.authorization.k8s.io"}})
	},
}, {
	name: "cert-manager's CA with a ServiceMonitor",
	args: []string{"--set", "certManager.enable=true,prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=t,prometheus.serviceMonitor.authorization.credentials.key=k"},
	check: func(t *testing.T, objs objects) {
		sm := objs["ServiceMonitor "+defaultNamespace+"/handroll"]
		equal(t, "tlsConfig", dig(sm, "spec", "endpoints", 0, "tlsConfig"), map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "handroll-metrics-cert", "key": "ca.crt"}},
			"serverName": "handroll-metrics." + defaultNamespace + ".svc"})
		equal(t, "credentials", dig(sm, "spec", "endpoints", 0, "authorization", "credentials"), map[string]any{"name": "t", "key": "k"})
	},
}, {
	name: "metrics off",
	args: []string{"--set", "metrics.enable=false,networkPolicy.enable=true"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, "--metrics-bind-address=0", "--health-probe-bind-address=:8081", "--webhook-port=9443")
		absent(t, objs, "Service "+defaultNamespace+"/handroll-metrics", "NetworkPolicy "+defaultNamespace+"/handroll-allow-metrics-traffic")
		present(t, objs, "NetworkPolicy "+defaultNamespace+"/handroll-allow-webhook-traffic")
		for _, p := range container(t, objs)["ports"].([]any) {
			if dig(p, "name") == "metrics" {
				t.Error("the container still names a metrics port")
			}
		}
	},
}, {
	name: "NetworkPolicy on",
	args: []string{"--set", "networkPolicy.enable=true,metrics.port=9090,webhook.port=10250",
		"--set", "networkPolicy.metricsNamespaceSelector.matchLabels.metrics=enabled,networkPolicy.metricsNamespaceSelector.matchLabels.team=obs"},
	check: func(t *testing.T, objs objects) {
		m := objs["NetworkPolicy "+defaultNamespace+"/handroll-allow-metrics-traffic"]
		w := objs["NetworkPolicy "+defaultNamespace+"/handroll-allow-webhook-traffic"]
		equal(t, "metrics policy port", dig(m, "spec", "ingress", 0, "ports", 0, "port"), 9090.0)
		equal(t, "metrics policy peers", dig(m, "spec", "ingress", 0, "from", 0, "namespaceSelector"), map[string]any{
			"matchLabels": map[string]any{"metrics": "enabled", "team": "obs"}})
		equal(t, "webhook policy port", dig(w, "spec", "ingress", 0, "ports", 0, "port"), 10250.0)
		equal(t, "webhook policy peers", dig(w, "spec", "ingress", 0, "from"), nil)
		wantArgs(t, objs, "--metrics-bind-address=:9090", "--metrics-secure", "--health-probe-bind-address=:8081", "--webhook-port=10250", "--metrics-ca-configmap=handroll-ca")
	},
}}

// rbacAndCRDValueCases leave out the user roles or the CRD, or let the CRD go.
var rbacAndCRDValueCases = []valueCase{{
	name: "user roles off",
	args: []string{"--set", "rbacHelpers.enable=false"},
	check: func(t *testing.T, objs objects) {
		absent(t, objs, "ClusterRole /webapp-admin", "ClusterRole /webapp-editor", "ClusterRole /webapp-viewer")
		present(t, objs, "ClusterRole /handroll-manager", "ClusterRole /handroll-metrics-reader")
	},
}, {
	name: "CRD disabled",
	args: []string{"--set", "crd.enable=false"},
	check: func(t *testing.T, objs objects) {
		absent(t, objs, crdKey)
		present(t, objs, deploymentKey, mwcKey)
	},
}, {
	name: "CRD not kept",
	args: []string{"--set", "crd.keep=false"},
	check: func(t *testing.T, objs objects) {
		if v := dig(objs[crdKey], "metadata", "annotations", "helm.sh/resource-policy"); v != nil {
			t.Errorf("crd.keep=false: the CRD still has helm.sh/resource-policy %v", v)
		}
	},
}}

// certValueCases set where the webhook and metrics certificates come from.
var certValueCases = []valueCase{{
	name: "cert-manager",
	args: []string{"--set", "certManager.enable=true"},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, append(slices.Clone(fileCertArgs), "--webhook-cert-dir=/var/run/handroll/webhook-cert", "--metrics-cert-dir=/var/run/handroll/metrics-cert")...)
		for _, k := range []string{mwcKey, vwcKey, crdKey} {
			equal(t, k+" inject-ca-from", dig(objs[k], "metadata", "annotations", "cert-manager.io/inject-ca-from"), defaultNamespace+"/handroll-webhook-cert")
		}
		present(t, objs, "Issuer "+defaultNamespace+"/handroll-selfsigned", "Issuer "+defaultNamespace+"/handroll-ca",
			"Certificate "+defaultNamespace+"/handroll-ca", "Certificate "+defaultNamespace+"/handroll-webhook-cert", "Certificate "+defaultNamespace+"/handroll-metrics-cert")
		absent(t, objs, webhookCertRBAC...)
		equal(t, "volumes", dig(objs[deploymentKey], "spec", "template", "spec", "volumes"), []any{
			map[string]any{"name": "webhook-cert", "secret": map[string]any{"secretName": "handroll-webhook-cert"}},
			map[string]any{"name": "metrics-cert", "secret": map[string]any{"secretName": "handroll-metrics-cert"}}})
	},
}, {
	name: "cert-manager with the user's issuer, metrics over HTTP",
	args: []string{"--set", "certManager.enable=true,certManager.issuerRef.kind=ClusterIssuer,certManager.issuerRef.name=corp-ca,metrics.secure=false"},
	check: func(t *testing.T, objs objects) {
		absent(t, objs, "Issuer "+defaultNamespace+"/handroll-selfsigned", "Issuer "+defaultNamespace+"/handroll-ca",
			"Certificate "+defaultNamespace+"/handroll-ca", "Certificate "+defaultNamespace+"/handroll-metrics-cert")
		equal(t, "issuerRef", dig(objs["Certificate "+defaultNamespace+"/handroll-webhook-cert"], "spec", "issuerRef"),
			map[string]any{"kind": "ClusterIssuer", "name": "corp-ca"})
		wantArgs(t, objs, "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--webhook-port=9443", "--webhook-cert-dir=/var/run/handroll/webhook-cert")
	},
}, {
	name: "an existing Secret",
	args: []string{"--set", "webhook.certSecret.name=my-webhook-tls,webhook.certSecret.caBundle=" + valuesCABundle},
	check: func(t *testing.T, objs objects) {
		wantArgs(t, objs, append(slices.Clone(fileCertArgs), "--webhook-cert-dir=/var/run/handroll/webhook-cert")...)
		equal(t, "volumes", dig(objs[deploymentKey], "spec", "template", "spec", "volumes"), []any{
			map[string]any{"name": "webhook-cert", "secret": map[string]any{"secretName": "my-webhook-tls"}}})
		equal(t, "volumeMounts", container(t, objs)["volumeMounts"], []any{
			map[string]any{"name": "webhook-cert", "mountPath": "/var/run/handroll/webhook-cert", "readOnly": true}})
		equal(t, "mutating caBundle", dig(objs[mwcKey], "webhooks", 0, "clientConfig", "caBundle"), valuesCABundle)
		equal(t, "validating caBundle", dig(objs[vwcKey], "webhooks", 0, "clientConfig", "caBundle"), valuesCABundle)
		equal(t, "conversion caBundle", dig(objs[crdKey], "spec", "conversion", "webhook", "clientConfig", "caBundle"), valuesCABundle)
		absent(t, objs, webhookCertRBAC...)
		absent(t, objs, "Certificate "+defaultNamespace+"/handroll-webhook-cert")
		if dig(objs[mwcKey], "metadata", "annotations") != nil {
			t.Error("the webhook configuration has annotations (cert-manager's?) with an existing Secret")
		}
	},
}}

// TestValues renders each notable combination of values and checks what
// it must change, and that the rest stays as the defaults render it.
func TestValues(t *testing.T) {
	for _, tc := range slices.Concat(managerValueCases, metricsValueCases, rbacAndCRDValueCases, certValueCases) {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustTemplate(t, defaultNamespace, tc.args...))
		})
	}
}

// TestValuesRefused checks that values that cannot work fail the rendering
// with a message that names them.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"manager.replicas=2,manager.leaderElection.enable=false", "manager.leaderElection.enable=false with manager.replicas > 1"},
		{"manager.replicas=1,manager.leaderElection.enable=false,manager.shards=3", "manager.shards needs manager.leaderElection.enable"},
		{"webhook.certSecret.name=mine", "webhook.certSecret.name needs webhook.certSecret.caBundle"},
		{"webhook.certSecret.name=mine,webhook.certSecret.caBundle=eA==,certManager.enable=true", "set one"},
		{"metrics.enable=false,prometheus.enable=true", "prometheus.enable needs metrics.enable"},
		{"prometheus.enable=true", "prometheus.serviceMonitor.authorization.credentials.name"},
		{"prometheus.serviceAccount.name=prometheus-k8s", "prometheus.serviceAccount is replaced: set metrics.reader.subjects"},
		{"prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=t,webhook.certSecret.name=m,webhook.certSecret.caBundle=eA==",
			"needs a metrics certificate Prometheus can verify"},
		{"metrics.reader.subjects[0].name=nobody", "kind"},
		{"manager.logging.format=yaml", "format"},
		{"manager.image.digest=latest", "digest"},
		{"manager.replica=3", "replica"}, // a typo: the schema allows no unknown value
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := template(t, defaultNamespace, "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want an error naming %q", tc.set, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v\nwant it to name %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestAnotherNamespace installs into a namespace of the user's choice: every
// namespaced object, binding subject, webhook Service reference and the
// CRD's conversion Service follow it, and manifests/default's namespace
// appears nowhere.
func TestAnotherNamespace(t *testing.T) {
	const ns = "team-a-operators"
	for _, set := range []string{"", "certManager.enable=true,prometheus.enable=true,networkPolicy.enable=true," + scraperValues(ns), "prometheus.enable=true," + scraperValues(ns)} {
		args := []string{}
		if set != "" {
			args = append(args, "--set", set)
		}
		out, err := run(t, nil, helmPath(t), append([]string{"template", "handroll", "charts/handroll", "--namespace", ns}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), defaultNamespace) {
			t.Errorf("--set %q: the rendering names %s", set, defaultNamespace)
		}
		objs := parse(t, out, "helm template")
		clusterScoped := map[string]bool{"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
			"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
		for _, k := range objs.keys() {
			o := objs[k]
			got, _ := dig(o, "metadata", "namespace").(string)
			if clusterScoped[o["kind"].(string)] != (got == "") || (got != "" && got != ns) {
				t.Errorf("--set %q: %s is in namespace %q", set, k, got)
			}
			if subjects, ok := o["subjects"].([]any); ok {
				for _, s := range subjects {
					if dig(s, "name") == "handroll" && dig(s, "namespace") != ns {
						t.Errorf("--set %q: %s binds handroll in namespace %v", set, k, dig(s, "namespace"))
					}
				}
			}
		}
		for _, k := range []string{mwcKey, vwcKey} {
			equal(t, k+" Service namespace", dig(objs[k], "webhooks", 0, "clientConfig", "service", "namespace"), ns)
		}
		equal(t, "conversion Service namespace", dig(objs[crdKey], "spec", "conversion", "webhook", "clientConfig", "service", "namespace"), ns)
		if strings.HasPrefix(set, "prometheus.enable") {
			equal(t, "ServiceMonitor tlsConfig", dig(objs["ServiceMonitor "+ns+"/handroll"], "spec", "endpoints", 0, "tlsConfig"), map[string]any{
				"ca": map[string]any{"configMap": map[string]any{"name": "handroll-ca", "key": "ca.crt"}}, "serverName": "handroll-metrics." + ns + ".svc"})
			equal(t, "metrics reader subject namespace", dig(objs["ClusterRoleBinding /handroll-metrics-reader"], "subjects", 0, "namespace"), ns)
		}
		if strings.HasPrefix(set, "certManager") {
			equal(t, "webhook certificate DNS names", dig(objs["Certificate "+ns+"/handroll-webhook-cert"], "spec", "dnsNames"), []any{
				"handroll-webhook." + ns + ".svc", "handroll-webhook." + ns + ".svc.cluster.local"})
			equal(t, "inject-ca-from", dig(objs[mwcKey], "metadata", "annotations", "cert-manager.io/inject-ca-from"), ns+"/handroll-webhook-cert")
			equal(t, "ServiceMonitor serverName", dig(objs["ServiceMonitor "+ns+"/handroll"], "spec", "endpoints", 0, "tlsConfig", "serverName"), "handroll-metrics."+ns+".svc")
		}
	}
}

// uninstallHook are the pre-delete hook's objects, as "Kind name": the
// Job alone, its RBAC being the release's (uninstallRBAC).
var uninstallHook = []string{"Job handroll-uninstall"}

// uninstallRBAC is what the hook Job runs as, rendered with it.
var uninstallRBAC = []string{
	"ServiceAccount handroll-uninstall", "ClusterRole handroll-uninstall", "ClusterRoleBinding handroll-uninstall",
	"Role handroll-uninstall", "RoleBinding handroll-uninstall",
}

const uninstallJobKey = "Job " + defaultNamespace + "/handroll-uninstall"

// TestUninstallHook checks the pre-delete hook: none by default (helm
// uninstall keeps the WebApps); with uninstall.deleteWebApps a Job running
// handroll uninstall --delete-webapps from the operator's own image, on
// the operator's nodes, in the release's namespace, deleted however it
// ends, with a deadline and no retry, whose RBAC is no hook but the
// release's, so that no path of helm's leaves it behind; and off with
// uninstall.enable=false.
func TestUninstallHook(t *testing.T) {
	def := mustTemplate(t, defaultNamespace)
	for k, o := range def {
		if dig(o, "metadata", "annotations", "helm.sh/hook") != nil || strings.Contains(k, "handroll-uninstall") {
			t.Errorf("the defaults render %s: helm uninstall must keep the WebApps", k)
		}
	}
	objs := mustTemplate(t, defaultNamespace, "--set", "manager.image.digest=sha256:"+strings.Repeat("cd", 32),
		"--set", "manager.nodeSelector.pool=operators,manager.imagePullSecrets[0].name=regcred,uninstall.deleteWebApps=true")
	for _, k := range append(slices.Clone(uninstallHook), uninstallRBAC...) {
		kind, name, _ := strings.Cut(k, " ")
		key := kind + " " + defaultNamespace + "/" + name
		if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
			key = kind + " /" + name
		}
		o, ok := objs[key]
		if !ok {
			t.Errorf("%s is not rendered", key)
			continue
		}
		if kind != "Job" {
			equal(t, key+" hook", dig(o, "metadata", "annotations", "helm.sh/hook"), nil)
			continue
		}
		equal(t, key+" hook", dig(o, "metadata", "annotations", "helm.sh/hook"), "pre-delete")
		equal(t, key+" delete policy", dig(o, "metadata", "annotations", "helm.sh/hook-delete-policy"), "before-hook-creation,hook-succeeded,hook-failed")
	}
	for k, o := range objs {
		if dig(o, "metadata", "annotations", "helm.sh/hook") != nil && dig(o, "metadata", "namespace") == nil {
			t.Errorf("%s is a cluster-scoped hook: left behind whenever its delete policy does not run", k)
		}
	}
	job := objs[uninstallJobKey]
	pod := dig(job, "spec", "template", "spec")
	c := dig(pod, "containers", 0)
	equal(t, "the Job's image", dig(c, "image"), container(t, objs)["image"])
	equal(t, "the Job's args", dig(c, "args"), []any{"uninstall", "--operator-namespace=" + defaultNamespace, "--delete-webapps", "--timeout=2m"})
	equal(t, "the Job's nodeSelector", dig(pod, "nodeSelector"), dig(objs[deploymentKey], "spec", "template", "spec", "nodeSelector"))
	equal(t, "the Job's imagePullSecrets", dig(pod, "imagePullSecrets"), dig(objs[deploymentKey], "spec", "template", "spec", "imagePullSecrets"))
	equal(t, "the Job's ServiceAccount", dig(pod, "serviceAccountName"), "handroll-uninstall")
	equal(t, "the Job's retries", dig(job, "spec", "backoffLimit"), float64(0))
	equal(t, "the Job's deadline", dig(job, "spec", "activeDeadlineSeconds"), float64(300))

	longer := mustTemplate(t, defaultNamespace, "--set", "uninstall.deleteWebApps=true,uninstall.timeout=5m,uninstall.activeDeadlineSeconds=900")
	equal(t, "the Job's args, timeout 5m", dig(longer[uninstallJobKey], "spec", "template", "spec", "containers", 0, "args"),
		[]any{"uninstall", "--operator-namespace=" + defaultNamespace, "--delete-webapps", "--timeout=5m"})
	equal(t, "the Job's deadline, 900", dig(longer[uninstallJobKey], "spec", "activeDeadlineSeconds"), float64(900))

	off := mustTemplate(t, defaultNamespace, "--set", "uninstall.enable=false,uninstall.deleteWebApps=true")
	for k, o := range off {
		if dig(o, "metadata", "annotations", "helm.sh/hook") != nil {
			t.Errorf("uninstall.enable=false still renders the hook %s", k)
		}
	}
	if _, err := template(t, defaultNamespace, "--set", "uninstall.timeout=soon"); err == nil {
		t.Error("uninstall.timeout=soon was accepted; want the schema to refuse it")
	}
}

// TestCAConfigMapFollowsTheRelease: the ConfigMap the operator publishes
// its CA in is the release's full name and -ca, in the flag, the Role that
// lets the operator write it, and the ServiceMonitor that trusts it; none
// with certificates from files.
func TestCAConfigMapFollowsTheRelease(t *testing.T) {
	for release, want := range map[string]string{"handroll": "handroll-ca", "shop": "shop-handroll-ca", "handroll-blue": "handroll-blue-ca"} {
		out, err := run(t, nil, helmPath(t), "template", release, "charts/handroll", "--namespace", defaultNamespace,
			"--set", "prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=t")
		if err != nil {
			t.Fatal(err)
		}
		objs := parse(t, out, "helm template "+release)
		if !slices.Contains(args(t, objs), "--metrics-ca-configmap="+want) {
			t.Errorf("release %s: args %v, want --metrics-ca-configmap=%s", release, args(t, objs), want)
		}
		equal(t, "release "+release+": the Role's ConfigMap", dig(objs["Role "+defaultNamespace+"/handroll-webhook-certs"], "rules", 3, "resourceNames"), []any{want})
		equal(t, "release "+release+": the ServiceMonitor's CA", dig(objs["ServiceMonitor "+defaultNamespace+"/handroll"], "spec", "endpoints", 0, "tlsConfig", "ca", "configMap", "name"), want)
	}
	for _, set := range []string{"certManager.enable=true", "webhook.certSecret.name=m,webhook.certSecret.caBundle=eA==", "metrics.secure=false", "metrics.enable=false"} {
		objs := mustTemplate(t, defaultNamespace, "--set", set)
		for _, a := range args(t, objs) {
			if strings.HasPrefix(a, "--metrics-ca-configmap") {
				t.Errorf("--set %s: %s, where there is no self-managed CA or no certificate to verify", set, a)
			}
		}
		if rules, ok := dig(objs["Role "+defaultNamespace+"/handroll-webhook-certs"], "rules").([]any); ok && len(rules) != 2 {
			t.Errorf("--set %s: the Role grants %v; want the Secret's rules alone", set, rules)
		}
	}
}

// TestNotesNameTheReaderSubjects: with metrics over HTTPS and nobody bound
// to read them, NOTES.txt says exactly what to set; once set, it does not.
func TestNotesNameTheReaderSubjects(t *testing.T) {
	notes := func(set string) string {
		t.Helper()
		out, err := run(t, nil, helmPath(t), "install", "handroll", "charts/handroll", "--namespace", defaultNamespace, "--dry-run=client", "--set", set)
		if err != nil {
			t.Fatal(err)
		}
		_, n, ok := strings.Cut(string(out), "NOTES:")
		if !ok {
			t.Fatalf("--set %s: no NOTES in\n%s", set, out)
		}
		return n
	}
	unbound := notes("prometheus.enable=true,prometheus.serviceMonitor.authorization.credentials.name=prometheus-token")
	for _, want := range []string{
		"ConfigMap handroll-ca in " + defaultNamespace + " (key ca.crt)",
		"handroll-metrics." + defaultNamespace + ".svc",
		"Prometheus's scrapes are refused (403)",
		"Secret prometheus-token",
		"helm upgrade handroll --reuse-values --set 'metrics.reader.subjects[0].kind=ServiceAccount," +
			"metrics.reader.subjects[0].name=<its name>,metrics.reader.subjects[0].namespace=<its namespace>'",
		"--clusterrole=handroll-metrics-reader",
	} {
		if !strings.Contains(unbound, want) {
			t.Errorf("NOTES without reader subjects do not say %q:\n%s", want, unbound)
		}
	}
	if bound := notes("prometheus.enable=true," + scraperValues(defaultNamespace)); strings.Contains(bound, "metrics.reader.subjects") {
		t.Errorf("NOTES still ask for metrics.reader.subjects once set:\n%s", bound)
	}
}
