{{/*
The chart renders the files of deploy/<flavour> (linked under files/), the
manifests `kubectl apply -k` installs, and changes in them only what the
values set: each object is read with fromYaml, changed in place by
"kube-dns-rs.object", and printed with toYaml. With the default values the
objects are those of `kubectl kustomize deploy/<flavour>` (checked by
integration-tests/tests/deploy_manifests/helm.rs).
*/}}

{{/* The images' registry, or a clear failure. */}}
{{- define "kube-dns-rs.registry" -}}
{{- required "image.registry is required: the registry path the images were pushed to, e.g. --set image.registry=ghcr.io/OWNER/kube-dns-rs (deploy/build-images.sh PREFIX). No default: no registry of this project exists to default to." .Values.image.registry -}}
{{- end -}}

{{/* One of our images: "localhost/kube-dns-rs/NAME:TAG" moved to the values'. */}}
{{- define "kube-dns-rs.image" -}}
{{- $name := .image | trimPrefix "localhost/kube-dns-rs/" | splitList ":" | first -}}
{{- $digest := get .root.Values.image.digests $name | default "" -}}
{{- if $digest -}}
{{- printf "%s/%s@%s" (include "kube-dns-rs.registry" .root) $name $digest -}}
{{- else -}}
{{- printf "%s/%s:%s" (include "kube-dns-rs.registry" .root) $name (.root.Values.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Whether an object belongs to kube-dns-autoscaler. */}}
{{- define "kube-dns-rs.isAutoscaler" -}}
{{- if or (eq .metadata.name "kube-dns-autoscaler") (eq .metadata.name "kube-dns-rs-autoscaler") -}}true{{- end -}}
{{- end -}}

{{/* The autoscaler's parameters, in the manifests' key order. */}}
{{- define "kube-dns-rs.linear" -}}
{{- $a := .Values.autoscaler -}}
{{- $max := $a.max | default (ternary 20 50 (eq .Values.flavour "kubernetes")) -}}
{{- if gt (int $a.min) (int $max) -}}
{{- fail (printf "autoscaler.min (%d) is above autoscaler.max (%d)" (int $a.min) (int $max)) -}}
{{- end -}}
{{- printf `{"coresPerReplica":%d,"nodesPerReplica":%d,"min":%d,"max":%d,"preventSinglePointFailure":true,"includeUnschedulableNodes":true}` (int $a.coresPerReplica) (int $a.nodesPerReplica) (int $a.min) (int $max) -}}
{{- end -}}

{{/* skydns's arguments with the values' settings in place of the manifests'. */}}
{{- define "kube-dns-rs.skydnsArgs" -}}
{{- $s := .Values.skydns -}}
{{- $set := dict
  "-rcache=" (printf "%d" (int $s.rcache.size))
  "-rcache-ttl=" (printf "%d" (int $s.rcache.ttlSeconds))
  "-autopath=" (printf "%t" $s.autopath)
  "-pods=" $s.pods
  "-lameduck=" (printf "%ds" (int $s.lameduckSeconds)) -}}
{{- $args := list -}}
{{- range $arg := .args -}}
{{- $new := $arg -}}
{{- range $prefix, $value := $set -}}
{{- if hasPrefix $prefix $arg -}}{{- $new = printf "%s%s" $prefix $value -}}{{- end -}}
{{- end -}}
{{- $args = append $args $new -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/* Changes one object of the manifests in place (.o) from the values. */}}
{{- define "kube-dns-rs.object" -}}
{{- $o := .o -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- if and (eq $o.kind "Service") (eq $o.metadata.name "kube-dns") $v.clusterIP -}}
{{- $_ := set $o.spec "clusterIP" $v.clusterIP -}}
{{- end -}}
{{- if and (eq $o.kind "ConfigMap") (eq $o.metadata.name "kube-dns-autoscaler") -}}
{{- $_ := set $o.data "linear" (include "kube-dns-rs.linear" $root) -}}
{{- end -}}
{{- if and (eq $o.kind "ReplicationController") (not (kindIs "invalid" $v.replicas)) -}}
{{- $_ := set $o.spec "replicas" (int $v.replicas) -}}
{{- end -}}
{{- if and (eq $o.kind "Deployment") (eq $o.metadata.name "kube-dns") (not $v.autoscaler.enabled) -}}
{{- $_ := set $o.spec "replicas" (int ($v.replicas | default 2)) -}}
{{- end -}}
{{- if has $o.kind (list "Deployment" "StatefulSet" "ReplicationController") -}}
{{- range $c := $o.spec.template.spec.containers -}}
{{- if hasPrefix "localhost/kube-dns-rs/" $c.image -}}
{{- $_ := set $c "image" (include "kube-dns-rs.image" (dict "image" $c.image "root" $root)) -}}
{{- end -}}
{{- $resources := get $v.resources $c.name -}}
{{- if $resources -}}
{{- $_ := set $c "resources" $resources -}}
{{- end -}}
{{- if and (eq $c.name "skydns") (ne $v.flavour "legacy") -}}
{{- $_ := set $c "args" (include "kube-dns-rs.skydnsArgs" (dict "args" $c.args "Values" $v) | fromJsonArray) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
