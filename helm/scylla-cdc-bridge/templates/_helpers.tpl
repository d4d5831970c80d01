{{/* Names and labels, as `helm create` makes them. */}}
{{- define "scylla-cdc-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "scylla-cdc-bridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "scylla-cdc-bridge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "scylla-cdc-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: scylla-cdc-bridge
{{- end }}

{{- define "scylla-cdc-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "scylla-cdc-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "scylla-cdc-bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "scylla-cdc-bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "scylla-cdc-bridge.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the pod finds its files. */}}
{{- define "scylla-cdc-bridge.paths" -}}
config: /etc/cdc-bridge/worker.properties
scyllaPassword: /etc/cdc-bridge/secrets/scylla/password
kafkaPassword: /etc/cdc-bridge/secrets/kafka/password
kafkaCa: /etc/cdc-bridge/tls/kafka-ca/ca.crt
kafkaClientCert: /etc/cdc-bridge/tls/kafka-client/tls.crt
kafkaClientKey: /etc/cdc-bridge/tls/kafka-client/tls.key
restUsers: /etc/cdc-bridge/secrets/rest/users
restTlsCert: /etc/cdc-bridge/tls/rest/tls.crt
restTlsKey: /etc/cdc-bridge/tls/rest/tls.key
restTlsCa: /etc/cdc-bridge/tls/rest/ca.crt
{{- end }}

{{/* The Secret holding the CQL password: the user's, or the chart's own (empty: none). */}}
{{- define "scylla-cdc-bridge.scyllaSecret" -}}
{{- if .Values.scylla.auth.existingSecret }}{{ .Values.scylla.auth.existingSecret }}
{{- else if .Values.scylla.auth.password }}{{ include "scylla-cdc-bridge.fullname" . }}-scylla
{{- end }}
{{- end }}

{{- define "scylla-cdc-bridge.kafkaSecret" -}}
{{- if .Values.kafka.sasl.existingSecret }}{{ .Values.kafka.sasl.existingSecret }}
{{- else if .Values.kafka.sasl.password }}{{ include "scylla-cdc-bridge.fullname" . }}-kafka
{{- end }}
{{- end }}

{{- define "scylla-cdc-bridge.sasl" -}}
{{- has .Values.kafka.securityProtocol (list "SASL_PLAINTEXT" "SASL_SSL") }}
{{- end }}

{{- define "scylla-cdc-bridge.tls" -}}
{{- has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") }}
{{- end }}

{{/*
The settings the pod runs with: the user's `config` plus what the chart manages. Numbers are
printed as integers (YAML numbers reach templates as floats: 86400000 would print as 8.64e+07).
*/}}
{{- define "scylla-cdc-bridge.settings" -}}
{{- $paths := include "scylla-cdc-bridge.paths" . | fromYaml }}
{{- $settings := dict "name" (include "scylla-cdc-bridge.fullname" .) }}
{{- range $key, $value := .Values.config }}
{{- if kindIs "float64" $value }}
{{- $_ := set $settings $key (printf "%d" (int64 $value)) }}
{{- else }}
{{- $_ := set $settings $key (toString $value) }}
{{- end }}
{{- end }}
{{- $_ := set $settings "metrics.port" (printf "%d" (int64 .Values.metrics.port)) }}
{{- if .Values.rest.enabled }}
{{- $scheme := ternary "https" "http" (ne .Values.rest.tls.secret "") }}
{{- $_ := set $settings "listeners" (printf "%s://0.0.0.0:%d" $scheme (int64 .Values.rest.port)) }}
{{- with .Values.rest.auth.existingSecret }}{{ $_ := set $settings "rest.auth.credentials.file" $paths.restUsers }}{{ end }}
{{- if .Values.rest.tls.secret }}
{{- $_ := set $settings "listeners.https.ssl.keystore.location" $paths.restTlsCert }}
{{- $_ := set $settings "listeners.https.ssl.key.location" $paths.restTlsKey }}
{{- if ne .Values.rest.tls.clientAuth "none" }}
{{- $_ := set $settings "listeners.https.ssl.truststore.location" $paths.restTlsCa }}
{{- $_ := set $settings "listeners.https.ssl.client.auth" .Values.rest.tls.clientAuth }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.scylla.auth.username }}{{ $_ := set $settings "scylla.user" . }}{{ end }}
{{- if include "scylla-cdc-bridge.scyllaSecret" . }}
{{- $_ := set $settings "scylla.password.file" $paths.scyllaPassword }}
{{- end }}
{{- $_ := set $settings "kafka.security.protocol" .Values.kafka.securityProtocol }}
{{- if eq (include "scylla-cdc-bridge.sasl" .) "true" }}
{{- $_ := set $settings "kafka.sasl.mechanism" .Values.kafka.sasl.mechanism }}
{{- $_ := set $settings "kafka.sasl.username" .Values.kafka.sasl.username }}
{{- $_ := set $settings "kafka.sasl.password.file" $paths.kafkaPassword }}
{{- end }}
{{- if eq (include "scylla-cdc-bridge.tls" .) "true" }}
{{- if .Values.kafka.tls.caSecret }}
{{- $_ := set $settings "kafka.ssl.ca.location" $paths.kafkaCa }}
{{- end }}
{{- if .Values.kafka.tls.clientSecret }}
{{- $_ := set $settings "kafka.ssl.certificate.location" $paths.kafkaClientCert }}
{{- $_ := set $settings "kafka.ssl.key.location" $paths.kafkaClientKey }}
{{- end }}
{{- end }}
{{- toYaml $settings }}
{{- end }}

{{/* Java .properties text of the settings: backslashes, newlines and leading blanks escaped. */}}
{{- define "scylla-cdc-bridge.properties" -}}
{{- $settings := include "scylla-cdc-bridge.settings" . | fromYaml }}
{{- $lines := list }}
{{- range $key, $value := $settings }}
{{- $text := $value | toString | replace "\\" "\\\\" | replace "\n" "\\n" }}
{{- $lines = append $lines (printf "%s=%s" $key (regexReplaceAll "^ " $text "\\ ")) }}
{{- end }}
{{- join "\n" $lines }}
{{- end }}

{{/* shutdown.timeout.ms (default 30 s) plus 15 s, in seconds, unless set. */}}
{{- define "scylla-cdc-bridge.grace" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- $shutdown := index .Values.config "shutdown.timeout.ms" | default 30000 | int64 }}
{{- add (div (add $shutdown 999) 1000) 15 }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}
