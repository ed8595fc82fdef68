{{/* Names and labels of the dra-scheduler chart. */}}

{{- define "dra-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name if it contains the chart name, else release-chart. */}}
{{- define "dra-scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dra-scheduler.serviceAccountName" -}}
{{- default (include "dra-scheduler.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "dra-scheduler.configMapName" -}}
{{- printf "%s-config" (include "dra-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dra-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dra-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dra-scheduler.labels" -}}
{{ include "dra-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Leader election: explicit true/false, or on when there is more than one replica. */}}
{{- define "dra-scheduler.leaderElect" -}}
{{- $le := .Values.leaderElection.enabled -}}
{{- if kindIs "bool" $le -}}
{{- ternary "true" "" $le -}}
{{- else if gt (int .Values.replicas) 1 -}}
true
{{- end -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration of the ConfigMap, from the values. */}}
{{- define "dra-scheduler.schedulerConfig" -}}
{{- $cfg := dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" -}}
{{- range $key := list "podInitialBackoffSeconds" "podMaxBackoffSeconds" "percentageOfNodesToScore" -}}
{{- /* a null value removes the key (helm's value coalescing) */ -}}
{{- if hasKey $.Values $key }}{{ $_ := set $cfg $key (get $.Values $key) }}{{ end -}}
{{- end -}}
{{- $profiles := list -}}
{{- range $i, $p := .Values.profiles -}}
{{- if not $p.schedulerName -}}
{{- fail (printf "profiles[%d].schedulerName is required" $i) -}}
{{- end -}}
{{- $out := dict "schedulerName" $p.schedulerName -}}
{{- $plugins := deepCopy (default dict $p.plugins) -}}
{{- if $p.weights -}}
{{- $score := deepCopy (default dict (get $plugins "score")) -}}
{{- $enabled := default list (get $score "enabled") -}}
{{- range $name, $w := $p.weights -}}
{{- $enabled = append $enabled (dict "name" $name "weight" $w) -}}
{{- end -}}
{{- $_ := set $score "enabled" $enabled -}}
{{- $_ := set $plugins "score" $score -}}
{{- end -}}
{{- if $plugins }}{{ $_ := set $out "plugins" $plugins }}{{ end -}}
{{- with $p.pluginConfig }}{{ $_ := set $out "pluginConfig" . }}{{ end -}}
{{- if not (kindIs "invalid" $p.percentageOfNodesToScore) -}}
{{- $_ := set $out "percentageOfNodesToScore" $p.percentageOfNodesToScore -}}
{{- end -}}
{{- $profiles = append $profiles $out -}}
{{- end -}}
{{- $_ := set $cfg "profiles" $profiles -}}
{{- toYaml $cfg -}}
{{- end -}}
