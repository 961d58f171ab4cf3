{{/*
The labels Helm charts put on every object they install, beside the
manifests' own app.kubernetes.io/name. Selectors and the pod template keep
the manifests' labels only: a selector cannot change on upgrade.
*/}}
{{- define "handroll.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The operator's image: repository@digest, else repository:tag (default: the app version). */}}
{{- define "handroll.image" -}}
{{- $img := .Values.manager.image -}}
{{- if $img.digest -}}
{{- $img.repository }}@{{ $img.digest }}
{{- else -}}
{{- $img.repository }}:{{ $img.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
Where the webhook server's certificate comes from: self-managed (handroll
makes and rotates its own, in a Secret), cert-manager, or secret (one the
user keeps).
*/}}
{{- define "handroll.webhookCerts" -}}
{{- if and .Values.certManager.enable .Values.webhook.certSecret.name -}}
{{- fail "certManager.enable and webhook.certSecret.name both choose the webhook certificate: set one" -}}
{{- else if .Values.certManager.enable -}}
cert-manager
{{- else if .Values.webhook.certSecret.name -}}
{{- if not .Values.webhook.certSecret.caBundle -}}
{{- fail "webhook.certSecret.name needs webhook.certSecret.caBundle: the API server must trust the certificate, and handroll writes no caBundle when it does not manage the certificate" -}}
{{- end -}}
secret
{{- else -}}
self-managed
{{- end -}}
{{- end }}

{{/* The Secret the webhook certificate is mounted from, when not self-managed. */}}
{{- define "handroll.webhookCertSecret" -}}
{{- if .Values.webhook.certSecret.name -}}
{{ .Values.webhook.certSecret.name }}
{{- else -}}
handroll-webhook-cert
{{- end -}}
{{- end }}

{{/* The metrics server's certificate comes from cert-manager: only over HTTPS. */}}
{{- define "handroll.metricsCertManager" -}}
{{- if and .Values.certManager.enable .Values.metrics.enable .Values.metrics.secure -}}
true
{{- end -}}
{{- end }}

{{/* cert-manager's CA injection, on the webhook configurations and the CRD. */}}
{{- define "handroll.injectCA" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/handroll-webhook-cert
{{- end }}

{{/* The issuer of the serving certificates: the user's, else the chart's own CA. */}}
{{- define "handroll.issuerRef" -}}
{{- if .Values.certManager.issuerRef -}}
{{ toYaml .Values.certManager.issuerRef }}
{{- else -}}
kind: Issuer
name: handroll-ca
{{- end -}}
{{- end }}

{{- /*
Refuses a change of manager.shards while replicas of the live Deployment
run. Replicas of two splits never reconcile together (docs/sharding.md,
"One split at a time"): in a rolling update each waits for the other, and
no WebApp is reconciled until the last old replica is gone. With none left
(manager.replicas=0 first) the new split starts alone. lookup is empty
under helm template, --dry-run and GitOps tools: they get no check, and
docs/sharding.md gives them the same procedure.
*/}}
{{- define "handroll.checkShardsChange" -}}
{{- $m := .Values.manager }}
{{- $live := lookup "apps/v1" "Deployment" .Release.Namespace "handroll" }}
{{- if $live }}
{{- $liveShards := 0 }}
{{- range $c := dig "spec" "template" "spec" "containers" list $live }}
{{- if eq $c.name "manager" }}
{{- range $a := $c.args | default list }}
{{- if hasPrefix "--shards=" $a }}
{{- $liveShards = trimPrefix "--shards=" $a | int }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $replicas := int (dig "spec" "replicas" 0 $live) }}
{{- $running := int (dig "status" "replicas" 0 $live) }}
{{- if and (ne $liveShards (int $m.shards)) (or (gt $replicas 0) (gt $running 0)) }}
{{- $ns := .Release.Namespace }}
{{- fail (printf `manager.shards=%d: the Deployment %s/handroll runs --shards=%d (%d replicas). Replicas of two splits wait for each other, so a rolling update would reconcile no WebApp until the last old replica is gone. Change it with no replica running:
  1. helm upgrade %s <chart> -n %s --reuse-values --set manager.replicas=0
  2. wait until kubectl -n %s get pods -l app.kubernetes.io/name=handroll lists none (a graceful stop takes up to 40 s)
  3. helm upgrade %s <chart> -n %s --reuse-values --set manager.replicas=%d,manager.shards=%d
From step 1 until step 3's replicas are ready the webhooks are down: WebApp writes are refused and nothing is reconciled. See docs/sharding.md.`
  (int $m.shards) $ns $liveShards (max $replicas $running) .Release.Name $ns $ns .Release.Name $ns (max (int $m.replicas) 1) (int $m.shards)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The release's full name, as helm create writes it: the release name, with
the chart's name appended unless it already holds it.
*/}}
{{- define "handroll.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
The ConfigMap the operator publishes its self-managed CA in
(--metrics-ca-configmap), which scrapers verify /metrics with: only with the
self-managed certificates and a metrics server over HTTPS; empty otherwise.
*/}}
{{- define "handroll.caConfigMap" -}}
{{- if and (eq (include "handroll.webhookCerts" .) "self-managed") .Values.metrics.enable .Values.metrics.secure -}}
{{ include "handroll.fullname" . }}-ca
{{- end -}}
{{- end }}
