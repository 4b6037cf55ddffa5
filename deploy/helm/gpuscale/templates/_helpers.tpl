{{/* The prefix of every object's name: the release name, or "<release>-gpuscale". */}}
{{- define "gpuscale.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of one component (exporter, adapter): the selector label plus bookkeeping. */}}
{{- define "gpuscale.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: gpuscale
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "gpuscale.image" -}}
{{ required "image.repository: no image is published; build it and set image.repository (docs/install.md, \"The image\")" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gpuscale.exporter" -}}{{ include "gpuscale.fullname" . }}-exporter{{- end -}}
{{- define "gpuscale.adapter" -}}{{ include "gpuscale.fullname" . }}-adapter{{- end -}}
{{- define "gpuscale.adapterTlsSecret" -}}
{{- if or .Values.adapter.tls.certManager (not .Values.adapter.tls.secretName) -}}
{{ include "gpuscale.adapter" . }}-tls
{{- else -}}
{{ .Values.adapter.tls.secretName }}
{{- end -}}
{{- end -}}
{{/* "true" when the adapter manages its own serving certificate: no
     cert-manager and no Secret given (adapter.tls). */}}
{{- define "gpuscale.adapterSelfTls" -}}
{{- if and (not .Values.adapter.tls.certManager) (not .Values.adapter.tls.secretName) -}}true{{- end -}}
{{- end -}}
{{/* The metrics APIServices this release registers (adapter.apiServices), comma-separated. */}}
{{- define "gpuscale.adapterApiServiceNames" -}}
{{- $on := .Values.adapter.apiServices -}}
{{- $names := list -}}
{{- if $on.external }}{{ $names = append $names "v1beta1.external.metrics.k8s.io" }}{{ end -}}
{{- if $on.customV1beta2 }}{{ $names = append $names "v1beta2.custom.metrics.k8s.io" }}{{ end -}}
{{- if $on.customV1beta1 }}{{ $names = append $names "v1beta1.custom.metrics.k8s.io" }}{{ end -}}
{{- join "," $names -}}
{{- end -}}
{{- define "gpuscale.activator" -}}{{ include "gpuscale.fullname" . }}-activator{{- end -}}

{{/* The Secret whose ca.crt KEDA's client certificates must chain to: the
     given one, else the chart's cert-manager client certificate's; "" only
     with adapter.keda.allowAnyClient. */}}
{{- define "gpuscale.kedaClientCaSecret" -}}
{{- $k := .Values.adapter.keda -}}
{{- if and $k.enabled (not $k.allowAnyClient) -}}
{{- if $k.clientCaSecret -}}
{{ $k.clientCaSecret }}
{{- else if .Values.adapter.tls.certManager -}}
{{ include "gpuscale.kedaClientCert" . }}
{{- else -}}
{{- fail "adapter.keda.clientCaSecret: KEDA's listener requires client certificates; give the Secret (key ca.crt) of their CA, use cert-manager (adapter.tls.certManager), or set adapter.keda.allowAnyClient=true to open it to every client" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- define "gpuscale.kedaClientCert" -}}{{ include "gpuscale.fullname" . }}-keda-client{{- end -}}
