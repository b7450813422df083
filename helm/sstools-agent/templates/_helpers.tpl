{{/*
Names, labels and the per-service facts every template shares.
*/}}

{{- define "sstools-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-sstools-agent, or the release name alone when it already contains the chart name. */}}
{{- define "sstools-agent.fullname" -}}
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

{{- define "sstools-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Name of one component's objects: <fullname>-<component>. Call with (dict "root" $ "name" "router"). */}}
{{- define "sstools-agent.componentName" -}}
{{- printf "%s-%s" (include "sstools-agent.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Every pod of this release, whatever its component: default-deny and egress policies select these. */}}
{{- define "sstools-agent.releaseSelectorLabels" -}}
app.kubernetes.io/name: {{ include "sstools-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Pods of one component (Deployment selectors, Services, PDBs, network policies). Call with
(dict "root" $ "name" "router"); called with the root context alone, the release's labels
without a component (for objects that belong to no one service).
*/}}
{{- define "sstools-agent.selectorLabels" -}}
{{- $root := ternary .root . (hasKey . "root") }}
{{- include "sstools-agent.releaseSelectorLabels" $root }}
{{- if hasKey . "name" }}
app.kubernetes.io/component: {{ .name }}
{{- end }}
{{- end }}

{{/*
Labels of every object: selector labels, version and provenance, then commonLabels (never in a
selector: those are immutable) and an optional "extra" dict of the object's own. Same arguments
as selectorLabels, plus "extra". One dict, so a label given twice is one key: the chart's win,
then the object's own, then commonLabels.
*/}}
{{- define "sstools-agent.labels" -}}
{{- $root := ternary .root . (hasKey . "root") }}
{{- $chart := include "sstools-agent.selectorLabels" . | fromYaml }}
{{- $_ := set $chart "app.kubernetes.io/version" (toString $root.Chart.AppVersion) }}
{{- $_ := set $chart "app.kubernetes.io/part-of" (include "sstools-agent.name" $root) }}
{{- $_ := set $chart "app.kubernetes.io/managed-by" $root.Release.Service }}
{{- $_ := set $chart "helm.sh/chart" (include "sstools-agent.chart" $root) }}
{{- toYaml (merge $chart (deepCopy (.extra | default dict)) (deepCopy ($root.Values.commonLabels | default dict))) }}
{{- end }}

{{/* Where a component's settings live in values: its own block, the migration Job's in
`migrations`, the `helm test` Pod's in `tests`. */}}
{{- define "sstools-agent.valuesKey" -}}
{{- get (dict "migrate" "migrations" "test" "tests") .name | default .name }}
{{- end }}

{{/*
Labels and annotations of a component's pod template: (dict "root" $ "name" "agent"), with
"config" (what its pods read from the chart) for a long-running one. Labels: the object's, then
the component's and the global podLabels (selector labels always win, or the pods would leave
their Deployment). Annotations: a checksum of "config", then the component's and the global
podAnnotations.
*/}}
{{- define "sstools-agent.podMetadata" -}}
{{- $values := index .root.Values (include "sstools-agent.valuesKey" .) }}
{{- $labels := include "sstools-agent.labels" (dict "root" .root "name" .name) | fromYaml }}
{{- $labels = merge $labels (deepCopy ($values.podLabels | default dict)) (deepCopy (.root.Values.podLabels | default dict)) }}
{{- $annotations := dict }}
{{- with .config }}
{{- /* env is in the pod template already, so a change to it rolls the pods by itself; the
     checksum names the rendered configuration a pod runs, and keeps rolling them should it ever
     move into a ConfigMap. Secrets are referenced, never rendered: their content is not in it. */}}
{{- $_ := set $annotations "checksum/config" (sha256sum .) }}
{{- end }}
{{- $annotations = merge $annotations (deepCopy ($values.podAnnotations | default dict)) (deepCopy (.root.Values.podAnnotations | default dict)) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount a component's pods run as: (dict "root" $ "name" "agent"). Its own
serviceAccount.name, else <fullname>-<component> when the chart makes them, else the namespace's
"default".
*/}}
{{- define "sstools-agent.serviceAccountName" -}}
{{- $account := (index .root.Values (include "sstools-agent.valuesKey" .)).serviceAccount | default dict }}
{{- if .root.Values.serviceAccount.create }}
{{- $account.name | default (include "sstools-agent.componentName" .) }}
{{- else }}
{{- $account.name | default "default" }}
{{- end }}
{{- end }}

{{/*
A component's extra volumes or mounts: the global list, then its own. Call with
(dict "root" $ "name" "agent" "key" "extraVolumes" "indent" 8); renders the list's items on new
lines at that indent, or nothing at all.
*/}}
{{- define "sstools-agent.extras" -}}
{{- $values := index .root.Values (include "sstools-agent.valuesKey" .) }}
{{- with concat (index .root.Values .key | default list) (index $values .key | default list) }}
{{- toYaml . | nindent $.indent }}
{{- end }}
{{- end }}

{{/* repository:tag of a service's image; the tag defaults to the chart's appVersion. */}}
{{- define "sstools-agent.image" -}}
{{- $image := (index .root.Values .name).image }}
{{- $repository := $image.repository }}
{{- with .root.Values.global.imageRegistry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- printf "%s:%s" $repository (toString ($image.tag | default .root.Chart.AppVersion)) }}
{{- end }}

{{/* A service's pull policy: its own, else the global one. Same arguments as image. */}}
{{- define "sstools-agent.imagePullPolicy" -}}
{{- (index .root.Values .name).image.pullPolicy | default .root.Values.global.imagePullPolicy }}
{{- end }}

{{/*
What each service's code fixes (its settings class and its callers), so the templates can range
over the five services instead of repeating them:
  prefix:   the env_prefix of its settings class (<PREFIX>_HOST, <PREFIX>_<PORT NAME>_PORT)
  shared:   which global.env variables it reads
  secrets:  which secrets.keys variables it reads
  migrate:  `sstools-<name> migrate` exists and the migration Job runs it
  headless: it also gets a headless Service (client-side gRPC balancing)
  callers:  port name -> who may connect to it (a component, "test" for the `helm test` Pod, or
            "ingress" for the ingress controller)
*/}}
{{- define "sstools-agent.catalog" -}}
agent:
  prefix: AGENT
  shared: [LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT, LLM_BASE_URL, LLM_MODEL, LLM_TIMEOUT_SECONDS, LLM_MAX_TOKENS, LLM_TEMPERATURE, LLM_STOP]
  secrets: [JWT_PUBLIC_KEYS, CONFIRMATION_SECRET, DATABASE_URL, LLM_API_KEY, AGENT_OPS_CLIENT_SECRET]
  migrate: true
  callers: {http: [ingress]}
router:
  prefix: ROUTER
  shared: [LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT]
  secrets: [JWT_PUBLIC_KEYS]
  headless: true
  callers: {grpc: [agent, test]}
docparse:
  prefix: DOCPARSE
  shared: [LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT]
  secrets: [JWT_PUBLIC_KEYS]
  callers: {grpc: [agent]}
convo:
  prefix: CONVO
  shared: [LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT]
  secrets: [JWT_PUBLIC_KEYS, DATABASE_URL]
  migrate: true
  callers: {grpc: [agent], http: [ingress]}
ops:
  prefix: OPS
  shared: [LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT, LLM_BASE_URL, LLM_MODEL, LLM_TIMEOUT_SECONDS, LLM_MAX_TOKENS, LLM_TEMPERATURE, LLM_STOP]
  secrets: [JWT_PRIVATE_KEY, JWT_PUBLIC_KEYS, CONFIRMATION_SECRET, DATABASE_URL, LLM_API_KEY, OPS_SERVICE_CLIENTS, OPS_ADMIN_PASSWORD, OPS_OIDC_CLIENT_SECRET]
  migrate: true
  callers: {http: [ingress, agent, convo, test]}
{{- end }}

{{/* The Secret every secret variable comes from; rendering stops with this message when it is not named. */}}
{{- define "sstools-agent.secretName" -}}
{{- required "secrets.existingSecret is required: create a Secret holding the keys listed in secrets.keys (JWT_PRIVATE_KEY, DATABASE_URL, ...) and pass its name, e.g. --set secrets.existingSecret=sstools-agent-secrets" .Values.secrets.existingSecret }}
{{- end }}

{{/*
The env list of a service's container (Deployment and migration Job alike). Call with
(dict "root" $ "name" "agent"). In order:
  1. secrets: secretKeyRef into secrets.existingSecret for each variable the service reads (a key
     left empty in secrets.keys: the variable is not set), then the service's extraSecretEnv;
  2. plain values, later sources winning: global.env (the shared variables it reads), its env,
     the chart's wiring (listen on 0.0.0.0, ports from `ports`, in-cluster targets), its
     extraEnv. An empty string leaves the variable unset (the service's default).
DATABASE_URL always comes from the Secret, the bundled PostgreSQL's too: no secret in plain text.
*/}}
{{- define "sstools-agent.env" -}}
{{- $root := .root }}
{{- $name := .name }}
{{- $svc := index $root.Values $name }}
{{- $facts := index (include "sstools-agent.catalog" $root | fromYaml) $name }}
{{- $secretName := include "sstools-agent.secretName" $root }}
{{- $secretEnv := dict }}
{{- range $facts.secrets }}
{{- $_ := set $secretEnv . (index $root.Values.secrets.keys . | default "") }}
{{- end }}
{{- range $variable, $key := $svc.extraSecretEnv }}
{{- $_ := set $secretEnv $variable $key }}
{{- end }}
{{- range $variable, $key := $secretEnv }}
{{- if $key }}
- name: {{ $variable }}
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ $key }}
      {{- if has $variable $root.Values.secrets.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- $env := dict }}
{{- range $facts.shared }}
{{- if hasKey $root.Values.global.env . }}
{{- $_ := set $env . (index $root.Values.global.env .) }}
{{- end }}
{{- end }}
{{- range $variable, $value := $svc.env }}
{{- $_ := set $env $variable $value }}
{{- end }}
{{- /* wiring: what a pod in this release must use, whatever the README's laptop defaults say */}}
{{- $_ := set $env (printf "%s_HOST" $facts.prefix) "0.0.0.0" }}
{{- range $port, $number := $svc.ports }}
{{- $_ := set $env (printf "%s_%s_PORT" $facts.prefix (upper $port)) $number }}
{{- end }}
{{- if eq $name "agent" }}
{{- /* Service names of this release (same namespace), or loopback on one host. The router's is the
     headless one: it resolves to every ready router pod, and the agent's channel balances
     round_robin over them. */}}
{{- $_ := set $env "AGENT_ROUTER_TARGET" (include "sstools-agent.peer" (dict "root" $root "name" "router" "port" "grpc" "dns" "dns:///" "suffix" "-headless")) }}
{{- $_ := set $env "AGENT_CONVO_TARGET" (include "sstools-agent.peer" (dict "root" $root "name" "convo" "port" "grpc")) }}
{{- $_ := set $env "AGENT_DOCPARSE_TARGET" (include "sstools-agent.peer" (dict "root" $root "name" "docparse" "port" "grpc")) }}
{{- $_ := set $env "AGENT_OPS_URL" (printf "http://%s" (include "sstools-agent.peer" (dict "root" $root "name" "ops" "port" "http"))) }}
{{- end }}
{{- if eq $name "ops" }}
{{- $_ := set $env "ENVIRONMENTS" (include "sstools-agent.environments" $root) }}
{{- end }}
{{- if eq $name "convo" }}
{{- /* convo asks ops whether a signed-in user is still active */}}
{{- $_ := set $env "CONVO_OPS_URL" (printf "http://%s" (include "sstools-agent.peer" (dict "root" $root "name" "ops" "port" "http"))) }}
{{- end }}
{{- range $variable, $value := $svc.extraEnv }}
{{- $_ := set $env $variable $value }}
{{- end }}
{{- range $variable, $value := $env }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
- name: {{ $variable }}
  value: {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* /tmp and the image user's cache: the only writable places, as the root filesystem is read-only. */}}
{{- define "sstools-agent.scratchVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratch.tmpSizeLimit }}
- name: cache
  emptyDir:
    sizeLimit: {{ .Values.scratch.cacheSizeLimit }}
{{- end }}

{{- define "sstools-agent.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: cache
  mountPath: {{ .Values.scratch.cacheMountPath }}
{{- end }}

{{/*
host:port where a service reaches a peer's port: (dict "root" $ "name" "convo" "port" "grpc"), with
optional "dns" (a resolver prefix) and "suffix" (of the Service name); 127.0.0.1 on a single host.
*/}}
{{- define "sstools-agent.peer" -}}
{{- $port := index (index .root.Values .name).ports .port }}
{{- if .root.Values.singleHost }}
{{- printf "127.0.0.1:%v" $port }}
{{- else }}
{{- printf "%s%s%s:%v" (.dns | default "") (include "sstools-agent.componentName" .) (.suffix | default "") $port }}
{{- end }}
{{- end }}

{{/*
Pod-level settings shared by the Deployments and the migration Job: (dict "root" $ "name" "agent").
No pod calls the Kubernetes API, so none gets a token, whichever account it runs as.
*/}}
{{- define "sstools-agent.podSettings" -}}
serviceAccountName: {{ include "sstools-agent.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .root.Values }}
{{- if .singleHost }}
hostNetwork: true
# the release's own names still resolve through the cluster's DNS, where there is one
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- with .global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .podSecurityContext | nindent 2 }}
{{- end }}
{{- end }}

{{- /* Where the agent serves its Gradio chat (sstools.agent.ui.app.CHAT_PATH): the same path on
     the pod's port and behind the ingress. */}}
{{- define "sstools-agent.chatPath" -}}
/api/agent/gradio
{{- end }}

{{/* The ingress controller's pods as one network-policy peer (namespace AND pod selector). Call with .Values.networkPolicy. */}}
{{- define "sstools-agent.ingressPeer" -}}
- namespaceSelector:
    {{- toYaml .ingressNamespaceSelector | nindent 4 }}
  {{- with .ingressPodSelector }}
  podSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{- /* ENVIRONMENTS as ops reads it (JSON): ops.environments (a list values.schema.json checks
     entry by entry), or the older JSON string in ops.env.ENVIRONMENTS; one of the two. */}}
{{- define "sstools-agent.environments" -}}
{{- $given := .Values.ops.env.ENVIRONMENTS | default "" }}
{{- with .Values.ops.environments }}
{{- if not (has (trim $given) (list "" "[]")) }}
{{- fail "give the Superset environments once: ops.environments (a list) or ops.env.ENVIRONMENTS (a JSON string), not both" }}
{{- end }}
{{- toJson . }}
{{- else }}
{{- $given }}
{{- end }}
{{- end }}

{{- /* The Superset origins that may frame the page (the drawer inside each Superset): every
     ENVIRONMENTS entry's browser_url, as one space-separated CSP source list. */}}
{{- define "sstools-agent.frameAncestors" -}}
{{- $origins := list }}
{{- range fromJsonArray (include "sstools-agent.environments" . | default "[]") }}
{{- with .browser_url }}
{{- $url := urlParse . }}
{{- $origins = append $origins (printf "%s://%s" $url.scheme $url.host) }}
{{- end }}
{{- end }}
{{- join " " ($origins | uniq) }}
{{- end }}

{{- /* ops must answer a slow read — its result, or the task that goes on with it — before the
     agent stops waiting: the person is then told what became of it, never "status unknown". */}}
{{- define "sstools-agent.timeoutsAgree" -}}
{{- $wait := .Values.ops.env.OPS_READ_WAIT_SECONDS | default "20" | float64 }}
{{- $tool := .Values.agent.env.AGENT_TOOL_TIMEOUT_SECONDS | default "30" | float64 }}
{{- if ge $wait $tool }}
{{- fail (printf "ops.env.OPS_READ_WAIT_SECONDS (%v) must be below agent.env.AGENT_TOOL_TIMEOUT_SECONDS (%v): ops would answer a slow read after the agent stopped waiting for it" $wait $tool) }}
{{- end }}
{{- end }}
