{{/* Chart name. */}}
{{- define "flagpole.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, unless the release name already holds the chart name. */}}
{{- define "flagpole.fullname" -}}
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

{{/* chart-version for helm.sh/chart. */}}
{{- define "flagpole.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "flagpole.labels" -}}
helm.sh/chart: {{ include "flagpole.chart" . }}
{{ include "flagpole.selectorLabels" . }}
app.kubernetes.io/version: {{ include "flagpole.tag" . | quote }}
app.kubernetes.io/part-of: flagpole
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* What selects this release's pods (both components). */}}
{{- define "flagpole.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flagpole.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image tag: image.tag or the chart's appVersion; `latest` is refused. */}}
{{- define "flagpole.tag" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString }}
{{- if eq $tag "latest" }}
{{- fail "image.tag must name a version, not latest" }}
{{- end }}
{{- $tag }}
{{- end }}

{{- define "flagpole.image" -}}
{{ .Values.image.repository }}:{{ include "flagpole.tag" . }}
{{- end }}

{{- define "flagpole.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flagpole.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read: the existing one, or the chart's. */}}
{{- define "flagpole.secretName" -}}
{{- default (include "flagpole.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* Where redis.tls.existingSecret's files are mounted (read-only). */}}
{{- define "flagpole.redisTlsDir" -}}
/etc/flagpole/redis-tls
{{- end }}

{{- define "flagpole.importConfigMapName" -}}
{{- default (printf "%s-import" (include "flagpole.fullname" .)) .Values.importSeed.existingConfigMap }}
{{- end }}

{{/* Refuses value combinations that cannot work, with the reason. */}}
{{- define "flagpole.validate" -}}
{{- if not .Values.image.repository }}
{{- fail "set image.repository: the registry path you pushed deploy/Dockerfile's image to" }}
{{- end }}
{{- if .Values.embedded.enabled }}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- fail "embedded.enabled: the embedded store serves one replica only (replicaCount: 1, autoscaling off); use Redis to scale out" }}
{{- end }}
{{- if .Values.delivery.separateDeployment }}
{{- fail "embedded.enabled: the delivery worker cannot run in a pod of its own (the store is one file); set delivery.separateDeployment: false" }}
{{- end }}
{{- else if and (not .Values.existingSecret) (not .Values.redis.url) }}
{{- fail "set redis.url or existingSecret (with the key secretKeys.redisUrl), or embedded.enabled for a single replica" }}
{{- end }}
{{- if and (eq .Values.redis.mode "sentinel") (not .Values.redis.sentinelService) (not .Values.embedded.enabled) }}
{{- fail "redis.mode sentinel needs redis.sentinelService: the master name the sentinels monitor" }}
{{- end }}
{{- with .Values.redis.tls }}
{{- if .enabled }}
{{- if $.Values.embedded.enabled }}
{{- fail "redis.tls.enabled: the embedded store uses no Redis; turn one of the two off" }}
{{- end }}
{{- if not .existingSecret }}
{{- fail "redis.tls.enabled needs redis.tls.existingSecret: the Secret holding the CA certificate (key redis.tls.caKey) and, with redis.tls.clientCertificate, the client certificate and key" }}
{{- end }}
{{- if and (not .caKey) (not .clientCertificate) }}
{{- fail "redis.tls.enabled mounts nothing: set redis.tls.caKey or redis.tls.clientCertificate" }}
{{- end }}
{{- if and $.Values.redis.url (not (hasPrefix "rediss://" $.Values.redis.url)) }}
{{- fail "redis.tls.enabled needs a rediss:// redis.url: the TLS files are used only with rediss://" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq .Values.auth.mode "token") (not .Values.existingSecret) (not .Values.auth.adminToken) }}
{{- fail "auth.mode token needs a bootstrap admin token: set auth.adminToken or existingSecret (with the key secretKeys.adminToken)" }}
{{- end }}
{{- if and .Values.importSeed.enabled (not .Values.importSeed.existingConfigMap) (not .Values.importSeed.document) }}
{{- fail "importSeed.enabled: set importSeed.document or importSeed.existingConfigMap" }}
{{- end }}
{{- $stop := add (div (add (int .Values.shutdown.drainMs) 999) 1000) (int .Values.shutdown.preStopSleepSeconds) }}
{{- if le (int .Values.shutdown.terminationGracePeriodSeconds) $stop }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must exceed the preStop sleep plus the drain (%d s), or pods are killed before they stop gracefully" (int .Values.shutdown.terminationGracePeriodSeconds) $stop) }}
{{- end }}
{{- end }}

{{/*
The environment of both components; `delivery` says whether this one runs the delivery worker.
Secrets only by reference. Optional keys of an existing Secret are optional references.
*/}}
{{- define "flagpole.env" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $secret := include "flagpole.secretName" $root }}
- name: FLAGPOLE_LISTEN
  value: "0.0.0.0:4242"
- name: FLAGPOLE_LOG_FORMAT
  value: json
{{- if $v.embedded.enabled }}
- name: FLAGPOLE_DATA_DIR
  value: /data
{{- else }}
- name: FLAGPOLE_REDIS_URL
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: {{ $v.secretKeys.redisUrl }}}
- name: FLAGPOLE_KEY_PREFIX
  value: {{ $v.redis.keyPrefix | quote }}
- name: FLAGPOLE_REDIS_MODE
  value: {{ $v.redis.mode | quote }}
{{- with $v.redis.sentinelService }}
- name: FLAGPOLE_REDIS_SENTINEL_SERVICE
  value: {{ . | quote }}
{{- end }}
{{- if not (kindIs "invalid" $v.redis.waitReplicas) }}
- name: FLAGPOLE_REDIS_WAIT_REPLICAS
  value: {{ $v.redis.waitReplicas | int | quote }}
{{- end }}
{{- if $v.redis.tls.enabled }}
{{- with $v.redis.tls.caKey }}
- name: FLAGPOLE_REDIS_TLS_CA
  value: {{ printf "%s/%s" (include "flagpole.redisTlsDir" $root) . | quote }}
{{- end }}
{{- if $v.redis.tls.clientCertificate }}
- name: FLAGPOLE_REDIS_TLS_CERT
  value: {{ printf "%s/%s" (include "flagpole.redisTlsDir" $root) $v.redis.tls.certKey | quote }}
- name: FLAGPOLE_REDIS_TLS_KEY
  value: {{ printf "%s/%s" (include "flagpole.redisTlsDir" $root) $v.redis.tls.keyKey | quote }}
{{- end }}
{{- end }}
{{- end }}
- name: FLAGPOLE_AUTH
  value: {{ $v.auth.mode | quote }}
- name: FLAGPOLE_CLIENT_AUTH
  value: {{ $v.auth.clientAuth | quote }}
{{- range $env, $pair := dict "FLAGPOLE_ADMIN_TOKEN" (list $v.secretKeys.adminToken $v.auth.adminToken) "FLAGPOLE_CLIENT_TOKEN" (list $v.secretKeys.clientToken $v.auth.clientToken) "FLAGPOLE_SESSION_SECRET" (list $v.secretKeys.sessionSecret $v.auth.sessionSecret) }}
{{- if or $v.existingSecret (index $pair 1) }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: {{ index $pair 0 }}{{ if $v.existingSecret }}, optional: true{{ end }}}
{{- end }}
{{- end }}
- name: FLAGPOLE_DELIVERY
  value: {{ .delivery | quote }}
- name: FLAGPOLE_READINESS_GRACE_MS
  value: {{ $v.probes.readinessGraceMs | int | quote }}
- name: FLAGPOLE_SHUTDOWN_DRAIN_MS
  value: {{ $v.shutdown.drainMs | int | quote }}
{{- if $v.trustProxy }}
- name: FLAGPOLE_TRUST_PROXY
  value: "true"
{{- end }}
{{- with $v.publicUrl }}
- name: FLAGPOLE_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{- if $v.importSeed.enabled }}
- name: FLAGPOLE_IMPORT_FILE
  value: {{ printf "/etc/flagpole/import/%s" $v.importSeed.fileName | quote }}
- name: FLAGPOLE_IMPORT_MODE
  value: {{ $v.importSeed.mode | quote }}
{{- end }}
{{- range $name, $value := $v.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The pod spec of both components: `component` (api | delivery), `delivery` (true | false),
`resources`.
*/}}
{{- define "flagpole.podSpec" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "flagpole.serviceAccountName" $root }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ $v.shutdown.terminationGracePeriodSeconds }}
containers:
  - name: flagpole
    image: {{ include "flagpole.image" $root | quote }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    securityContext:
      {{- toYaml $v.securityContext | nindent 6 }}
    ports:
      - name: http
        containerPort: 4242
        protocol: TCP
    env:
      {{- include "flagpole.env" (dict "root" $root "delivery" .delivery) | trim | nindent 6 }}
    startupProbe:
      httpGet: {path: /health/live, port: http}
      {{- toYaml $v.probes.startup | nindent 6 }}
    livenessProbe:
      httpGet: {path: /health/live, port: http}
      {{- toYaml $v.probes.liveness | nindent 6 }}
    readinessProbe:
      httpGet: {path: /health/ready, port: http}
      {{- toYaml $v.probes.readiness | nindent 6 }}
    {{- if gt (int $v.shutdown.preStopSleepSeconds) 0 }}
    lifecycle:
      preStop:
        sleep: {seconds: {{ int $v.shutdown.preStopSleepSeconds }}}
    {{- end }}
    resources:
      {{- toYaml .resources | nindent 6 }}
    {{- if or $v.embedded.enabled $v.importSeed.enabled $v.redis.tls.enabled }}
    volumeMounts:
      {{- if $v.embedded.enabled }}
      - name: data
        mountPath: /data
      {{- end }}
      {{- if $v.importSeed.enabled }}
      - name: import
        mountPath: /etc/flagpole/import
        readOnly: true
      {{- end }}
      {{- if $v.redis.tls.enabled }}
      - name: redis-tls
        mountPath: {{ include "flagpole.redisTlsDir" $root }}
        readOnly: true
      {{- end }}
    {{- end }}
{{- if or $v.embedded.enabled $v.importSeed.enabled $v.redis.tls.enabled }}
volumes:
  {{- if $v.embedded.enabled }}
  - name: data
    {{- if $v.embedded.persistence.enabled }}
    persistentVolumeClaim:
      claimName: {{ default (printf "%s-data" (include "flagpole.fullname" $root)) $v.embedded.persistence.existingClaim }}
    {{- else }}
    emptyDir: {}
    {{- end }}
  {{- end }}
  {{- if $v.importSeed.enabled }}
  - name: import
    configMap:
      name: {{ include "flagpole.importConfigMapName" $root }}
  {{- end }}
  {{- with $v.redis.tls }}
  {{- if .enabled }}
  # Only the named keys; group-readable (podSecurityContext.fsGroup), the key file included.
  - name: redis-tls
    secret:
      secretName: {{ .existingSecret }}
      defaultMode: 0440
      items:
        {{- with .caKey }}
        - {key: {{ . }}, path: {{ . }}}
        {{- end }}
        {{- if .clientCertificate }}
        - {key: {{ .certKey }}, path: {{ .certKey }}}
        - {key: {{ .keyKey }}, path: {{ .keyKey }}}
        {{- end }}
  {{- end }}
  {{- end }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range . }}
  - labelSelector:
      matchLabels:
        {{- include "flagpole.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ $.component }}
    {{- toYaml (omit . "labelSelector") | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Pod template annotations: roll the pods when the Secret or the import document changes. */}}
{{- define "flagpole.podAnnotations" -}}
{{- if not .Values.existingSecret }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- if and .Values.importSeed.enabled (not .Values.importSeed.existingConfigMap) }}
checksum/import: {{ include (print .Template.BasePath "/configmap-import.yaml") . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
