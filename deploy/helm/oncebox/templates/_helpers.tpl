{{- define "oncebox.fullname" -}}{{ printf "%s-oncebox" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "oncebox.labels" -}}
app.kubernetes.io/name: oncebox
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "oncebox.grace" -}}{{ add .Values.preStopSeconds .Values.jobTimeoutSeconds .Values.shutdownMarginSeconds .Values.killMarginSeconds }}{{- end -}}
{{- define "oncebox.secretEnv" -}}
{{- $root := . -}}
{{- if .Values.cloudnativepg.enabled }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ printf "%s-app" (include "oncebox.fullname" .) }}, key: uri}}
{{- else }}
{{- if not .Values.secrets.databaseURL.name }}{{ fail "secrets.databaseURL.name is required: name the Secret holding DATABASE_URL, or set cloudnativepg.enabled" }}{{ end }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.databaseURL.name }}, key: {{ .Values.secrets.databaseURL.key }}}}
{{- end }}
{{- range $env, $ref := dict "ONCEBOX_SEAL_KEY" .Values.secrets.sealKey "ONCEBOX_ADMIN_TOKEN" .Values.secrets.adminToken "STRIPE_API_KEY" .Values.secrets.stripeAPIKey "SENDGRID_API_KEY" .Values.secrets.sendgridAPIKey "STRIPE_WEBHOOK_SECRET" .Values.secrets.stripeWebhookSecret }}
{{- if $ref.name }}
- name: {{ $env }}
  valueFrom: {secretKeyRef: {name: {{ $ref.name }}, key: {{ $ref.key }}}}
{{- end }}
{{- end }}
{{- end -}}
{{- define "oncebox.env" -}}
{{ include "oncebox.secretEnv" . }}
- name: ONCEBOX_HEALTH_ADDR
  value: "0.0.0.0:8081"
- name: ONCEBOX_SHUTDOWN_GRACE
  value: {{ printf "%ds" (add .Values.jobTimeoutSeconds .Values.shutdownMarginSeconds | int) | quote }}
{{- range $v := list "STRIPE" "SENDGRID" "WEBHOOK" }}
- name: {{ printf "ONCEBOX_%s_JOB_TIMEOUT" $v }}
  value: {{ printf "%ds" ($.Values.jobTimeoutSeconds | int) | quote }}
{{- end }}
{{- with .Values.oauth.issuer }}
- name: ONCEBOX_OAUTH_ISSUER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.oauth.audience }}
- name: ONCEBOX_OAUTH_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- if .Values.tracing.enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.endpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .Values.tracing.serviceName | quote }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}
{{- define "oncebox.pod" -}}
{{- $c := .component -}}
{{- $root := .root -}}
metadata:
  labels:
    {{- include "oncebox.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $c }}
spec:
  terminationGracePeriodSeconds: {{ include "oncebox.grace" $root }}
  securityContext: {runAsNonRoot: true}
  containers:
    - name: oncebox
      image: {{ printf "%s:%s" $root.Values.image.repository $root.Values.image.tag | quote }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args: ["serve", "--roles", {{ .roles | quote }}{{ if eq $c "api" }}, "--addr", "0.0.0.0:8080"{{ end }}]
      env:
        {{- include "oncebox.env" $root | nindent 8 }}
      ports:
        {{- if eq $c "api" }}
        - {name: http, containerPort: 8080}
        {{- end }}
        - {name: health, containerPort: 8081}
      readinessProbe:
        httpGet: {path: /readyz, port: health}
        periodSeconds: 5
        timeoutSeconds: 3
        failureThreshold: 2
      livenessProbe:
        httpGet: {path: /livez, port: health}
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 6
      lifecycle:
        preStop:
          sleep: {seconds: {{ $root.Values.preStopSeconds }}}
      resources:
        {{- toYaml .resources | nindent 8 }}
{{- end -}}
