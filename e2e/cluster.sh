#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the e2e tests:
#   etcd -> kube-apiserver -> kube-controller-manager (claim, GC, namespace, PV binder + PV/PVC protection
#   controllers) -> kwok
# from the binaries built by e2e/build.sh. Everything listens on 127.0.0.1 only.
#
#   e2e/cluster.sh up                  start (idempotent: a healthy cluster is left alone)
#   e2e/cluster.sh down                stop everything and remove the run dir
#   e2e/cluster.sh status              per-component state; exit 1 unless all are up and ready
#   e2e/cluster.sh env                 shell exports: eval "$(e2e/cluster.sh env)"
#   e2e/cluster.sh restart-apiserver [SECONDS [GRACE]]  stop kube-apiserver (SIGTERM, SIGKILL after GRACE
#                                      seconds, default 5; 0 = crash), wait SECONDS (default 0), start it
#   e2e/cluster.sh stop|start|restart COMPONENT  one of: etcd kube-apiserver kube-controller-manager
#                                                kwok kube-scheduler kueue (the last two are not
#                                                started by `up`; start kueue with kueue-up first)
#   e2e/cluster.sh kube-scheduler-up   start upstream kube-scheduler (profile "default-scheduler") beside
#                                      the control plane: user system:kube-scheduler (own token and
#                                      kubeconfig, the bootstrap RBAC roles), --leader-elect=false, the same
#                                      feature gates, a free secure port, log in logs/kube-scheduler.log
#   e2e/cluster.sh kube-scheduler-down stop it
#   e2e/cluster.sh kueue-up            start Kueue (KUEUE_VERSION of versions.env, built by e2e/build.sh kueue)
#                                      beside the control plane: its CRDs, its manager out of cluster with the
#                                      admin kubeconfig, webhooks at https://127.0.0.1:<port> (a serving cert of
#                                      the cluster CA), only for namespaces labelled e2e.dra-scheduler.io/kueue=true;
#                                      config <run dir>/kueue/config.yaml, log logs/kueue.log (e2e/README.md)
#   e2e/cluster.sh kueue-down          delete its webhook configurations, stop it, drop its pod finalizers
#
# Environment:
#   E2E_RUN_DIR    run dir (default /tmp/dra-scheduler-e2e): kubeconfig, pki, logs/, etcd data
#   E2E_BIN_DIR    binaries (default ~/.cache/dra-scheduler/bin/<K8S_VERSION>)
#   E2E_ETCD_PORT E2E_ETCD_PEER_PORT E2E_APISERVER_PORT E2E_KCM_PORT E2E_KWOK_PORT E2E_SCHEDULER_PORT
#                  ports (defaults 23790 23800 26443 20257 20247 20259); E2E_PORTS=auto picks free
#                  ones (all distinct)
#   E2E_FEATURE_GATES_EXTRA / E2E_RUNTIME_CONFIG_EXTRA   appended to the pinned ones in versions.env
#   E2E_NO_QPS_LIMITS=1   kube-apiserver without inflight limits / priority-and-fairness (benchmarks)
#   E2E_LOG_V      klog verbosity of the kube components (default 1)
#   E2E_AUDIT_LOG=1       kube-apiserver writes an audit log to <run dir>/audit.log (policy
#                  <run dir>/audit-policy.yaml: level Metadata for create/update/patch/delete/deletecollection,
#                  nothing else; stage RequestReceived omitted; blocking mode; no rotation below 4 GiB).
#                  Read at each kube-apiserver start (e.g. restart-apiserver with E2E_AUDIT_LOG=0 turns it off)
#   E2E_KUEUE_CONFIG  a JSON Kueue Configuration to start from instead of the default one (its webhook, health,
#                  metrics, cert, namespace-selector and leader-election fields are always set by kueue-up)
#   E2E_KUEUE_LOG_LEVEL  Kueue's --zap-log-level (default 2)
#   E2E_KUBE_SCHEDULER_QPS / E2E_KUBE_SCHEDULER_BURST   kube-scheduler's clientConnection qps / burst
#                  (default 5000 / 5000), written to kube-scheduler.yaml at each kube-scheduler start
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUN=$E2E_RUN_DIR
case $RUN in *[[:space:]]*|"") die "E2E_RUN_DIR must be a non-empty path without spaces" ;; esac
MARKER=$RUN/.dra-scheduler-e2e
ENV_FILE=$RUN/cluster.env
COMPONENTS=(etcd kube-apiserver kube-controller-manager kwok)

FEATURE_GATES=$K8S_FEATURE_GATES${E2E_FEATURE_GATES_EXTRA:+,$E2E_FEATURE_GATES_EXTRA}
RUNTIME_CONFIG=$K8S_RUNTIME_CONFIG${E2E_RUNTIME_CONFIG_EXTRA:+,$E2E_RUNTIME_CONFIG_EXTRA}
LOG_V=${E2E_LOG_V:-1}

now_ms() { date +%s%3N; }
elapsed() { local ms=$(( $(now_ms) - $1 )); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }

# ---- binaries --------------------------------------------------------------------------------------
need_binaries() {
  local missing=() b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
    [ -x "$E2E_BIN_DIR/$b" ] || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "missing binaries in $E2E_BIN_DIR: ${missing[*]} -- run e2e/build.sh (or: make e2e-build)"
}

# ---- ports -----------------------------------------------------------------------------------------
port_free() {  # port_free PORT: can 127.0.0.1:PORT be listened on right now? (SO_REUSEADDR like Go
  # servers, so connections in TIME_WAIT from a previous run do not count)
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen()
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}
free_ports() {  # free_ports N [EXCLUDED...]: N distinct ports that can be listened on now, none of EXCLUDED.
  # All sockets are held open until every port is picked, so the kernel cannot hand out one port twice.
  python3 - "$@" <<'PY'
import socket, sys
n, excluded = int(sys.argv[1]), {int(p) for p in sys.argv[2:]}
held, ports = [], []
try:
    while len(ports) < n:
        s = socket.socket()
        held.append(s)
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        if p not in excluded and p not in ports:
            ports.append(p)
finally:
    for s in held:
        s.close()
print(" ".join(map(str, ports)))
PY
}
PORT_VARS=(ETCD_PORT:23790 ETCD_PEER_PORT:23800 APISERVER_PORT:26443 KCM_PORT:20257 KWOK_PORT:20247 SCHEDULER_PORT:20259)
choose_ports() {  # every port distinct (E2E_PORTS=auto once gave etcd and kwok the same one)
  local spec var def envvar val explicit=() auto=() seen=" " i=0
  for spec in "${PORT_VARS[@]}"; do
    envvar=E2E_${spec%%:*}
    [ -z "${!envvar:-}" ] || explicit+=("${!envvar}")
  done
  if [ "${E2E_PORTS:-}" = auto ]; then
    read -r -a auto <<< "$(free_ports ${#PORT_VARS[@]} "${explicit[@]}")"
    [ ${#auto[@]} -eq ${#PORT_VARS[@]} ] || die "cannot find free ports"
  fi
  for spec in "${PORT_VARS[@]}"; do
    def=${spec#*:}; var=${spec%%:*}; envvar=E2E_$var
    val=${!envvar:-}
    if [ -z "$val" ]; then
      if [ "${E2E_PORTS:-}" = auto ]; then val=${auto[$i]}; else val=$def; fi
    fi
    i=$((i + 1))
    case $seen in *" $val "*) die "port $val ($var) is also given to another component; set distinct E2E_*_PORT values" ;; esac
    seen+="$val "
    port_free "$val" || die "port 127.0.0.1:$val ($var) is in use; stop whatever uses it, set $envvar=<port>, or E2E_PORTS=auto"
    printf -v "$var" '%s' "$val"
  done
}

# ---- run dir, pki, configs ------------------------------------------------------------------------
prepare_run_dir() {
  if [ -e "$RUN" ] && [ ! -e "$MARKER" ]; then
    die "$RUN exists and was not created by e2e/cluster.sh; remove it or set E2E_RUN_DIR"
  fi
  rm -rf "$RUN"
  mkdir -p "$RUN"/{pki,logs,pids,etcd-data,kcm,kube-scheduler,kueue}
  chmod 700 "$RUN"
  touch "$MARKER"
}

gen_pki() {
  local p=$RUN/pki
  ( cd "$p"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -keyout ca.key -out ca.crt -subj "/CN=dra-scheduler-e2e-ca" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f apiserver.csr apiserver.ext ca.srl
  ) || die "openssl failed to generate the certificates in $p"
}

write_configs() {
  TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  SCHEDULER_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  DRA_SCHEDULER_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  # static bearer tokens: user e2e-admin in system:masters (bypasses RBAC); user system:kube-scheduler for
  # the upstream kube-scheduler (bound by the bootstrap roles system:kube-scheduler and
  # system:volume-scheduler, as on a real control plane); user dra-scheduler, no roles until a test binds
  # some (e2e/throughput_live.py scheduler_identity): both schedulers authenticate the same way
  { printf '%s,e2e-admin,e2e-admin,"system:masters"\n' "$TOKEN"
    printf '%s,system:kube-scheduler,system:kube-scheduler\n' "$SCHEDULER_TOKEN"
    printf '%s,dra-scheduler,dra-scheduler\n' "$DRA_SCHEDULER_TOKEN"
  } > "$RUN/tokens.csv"
  SERVER=https://127.0.0.1:$APISERVER_PORT
  local ca; ca=$(base64 -w0 < "$RUN/pki/ca.crt")
  cat > "$RUN/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dra-scheduler-e2e
  cluster:
    server: $SERVER
    certificate-authority-data: $ca
users:
- name: e2e-admin
  user:
    token: $TOKEN
contexts:
- name: dra-scheduler-e2e
  context:
    cluster: dra-scheduler-e2e
    user: e2e-admin
current-context: dra-scheduler-e2e
EOF
  chmod 600 "$RUN/kubeconfig" "$RUN/tokens.csv"

  # kwok: its options plus the Stage documents (standalone kwok embeds no default stages)
  { cat "$E2E_DIR/kwok/kwok-configuration.yaml"
    local f
    for f in "$E2E_DIR"/kwok/stages/*.yaml; do echo "---"; cat "$f"; done
  } > "$RUN/kwok.yaml"

  cat > "$ENV_FILE" <<EOF
E2E_RUN_DIR=$RUN
E2E_BIN_DIR=$E2E_BIN_DIR
K8S_VERSION=$K8S_VERSION
KUBECONFIG=$RUN/kubeconfig
E2E_SERVER=$SERVER
E2E_TOKEN=$TOKEN
E2E_SCHEDULER_TOKEN=$SCHEDULER_TOKEN
E2E_DRA_SCHEDULER_TOKEN=$DRA_SCHEDULER_TOKEN
E2E_CA_FILE=$RUN/pki/ca.crt
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KCM_PORT=$KCM_PORT
KWOK_PORT=$KWOK_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
EOF
}

load_env() {
  [ -f "$ENV_FILE" ] || return 1
  # shellcheck disable=SC1090
  . "$ENV_FILE"
  TOKEN=$E2E_TOKEN SERVER=$E2E_SERVER
}

# kube-scheduler's kubeconfig and KubeSchedulerConfiguration, (re)written before each start. It runs as
# system:kube-scheduler; a run dir made before that token existed falls back to the admin token.
write_kube_scheduler_config() {
  local user=system:kube-scheduler token=${E2E_SCHEDULER_TOKEN:-}
  [ -n "$token" ] || { user=e2e-admin; token=$E2E_TOKEN; }
  local ca; ca=$(base64 -w0 < "$RUN/pki/ca.crt")
  cat > "$RUN/kube-scheduler.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dra-scheduler-e2e
  cluster:
    server: $E2E_SERVER
    certificate-authority-data: $ca
users:
- name: $user
  user:
    token: $token
contexts:
- name: kube-scheduler
  context:
    cluster: dra-scheduler-e2e
    user: $user
current-context: kube-scheduler
EOF
  chmod 600 "$RUN/kube-scheduler.kubeconfig"
  # qps/burst as scheduler_perf (the default 50/100 would make a throughput comparison about client limits)
  cat > "$RUN/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $RUN/kube-scheduler.kubeconfig
  qps: ${E2E_KUBE_SCHEDULER_QPS:-5000}
  burst: ${E2E_KUBE_SCHEDULER_BURST:-5000}
leaderElection:
  leaderElect: false
EOF
}

# The audit policy of E2E_AUDIT_LOG=1 (rules are matched in order; the first match decides): every write at
# level Metadata (who, what, when, response code; no bodies), nothing else.
write_audit_policy() {
  cat > "$RUN/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
EOF
}

# A free secure port for kube-scheduler: the one chosen at `up` if still free, else (unless
# E2E_SCHEDULER_PORT pins it) a new free one, distinct from the other components'; saved in cluster.env.
pick_scheduler_port() {
  port_free "$SCHEDULER_PORT" && return 0
  [ -z "${E2E_SCHEDULER_PORT:-}" ] || die "port 127.0.0.1:$SCHEDULER_PORT (E2E_SCHEDULER_PORT) is in use"
  local p; p=$(free_ports 1 "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$KWOK_PORT")
  [ -n "$p" ] || die "cannot find a free port for kube-scheduler"
  log "kube-scheduler port $SCHEDULER_PORT is in use, using $p"
  SCHEDULER_PORT=$p
  sed -i "s/^SCHEDULER_PORT=.*/SCHEDULER_PORT=$p/" "$ENV_FILE"
}

# ---- Kueue ----------------------------------------------------------------------------------------
# Kueue runs out of cluster: no Service reaches it, so its webhooks are registered with clientConfig.url
# https://127.0.0.1:<port>/<path> and a serving certificate for IP 127.0.0.1 signed by the cluster CA (caBundle).
# internalCertManagement is off: its certificates are for <service>.<namespace>.svc, a name the API server could
# not reach here. With it off, Kueue 0.17 reads a metrics certificate from the fixed path /etc/kueue/metrics/certs
# (cmd/kueue/main.go) even when metrics are not served, so it runs in a private mount namespace with an overlay
# on /etc whose upper layer (in the run dir) holds that certificate: the host's /etc is not written. That needs
# root (or CAP_SYS_ADMIN), which the CI and the sessions have.
KUEUE_LABEL=e2e.dra-scheduler.io/kueue
KUEUE_DIR=$RUN/kueue

need_kueue() {
  [ -x "$E2E_BIN_DIR/kueue" ] && [ -s "$E2E_BIN_DIR/kueue-config/webhook-manifests.yaml" ] ||
    die "Kueue is not built in $E2E_BIN_DIR -- run e2e/build.sh kueue"
}

pick_kueue_ports() {  # the ports of the previous kueue-up if still free, else new free ones; saved in cluster.env
  if [ -n "${KUEUE_WEBHOOK_PORT:-}" ] && port_free "$KUEUE_WEBHOOK_PORT" && port_free "$KUEUE_HEALTH_PORT"; then
    return 0
  fi
  local p
  read -r KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT <<< "$(free_ports 2 "$ETCD_PORT" "$ETCD_PEER_PORT" \
    "$APISERVER_PORT" "$KCM_PORT" "$KWOK_PORT" "$SCHEDULER_PORT")"
  [ -n "$KUEUE_HEALTH_PORT" ] || die "cannot find free ports for Kueue"
  for p in KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT; do
    sed -i "/^$p=/d" "$ENV_FILE"
    echo "$p=${!p}" >> "$ENV_FILE"
  done
}

gen_kueue_pki() {  # serving cert for 127.0.0.1 from the cluster CA: the webhooks (certDir) and the metrics path
  local d=$KUEUE_DIR
  rm -rf "$d/certs" "$d/etc-upper" "$d/etc-work"
  mkdir -p "$d/certs" "$d/etc-upper/kueue/metrics/certs" "$d/etc-work"
  ( cd "$d/certs"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout tls.key -out tls.csr -subj "/CN=kueue-webhook-e2e" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > tls.ext
    openssl x509 -req -in tls.csr -CA "$RUN/pki/ca.crt" -CAkey "$RUN/pki/ca.key" -CAcreateserial \
      -CAserial "$d/certs/ca.srl" -days 3650 -extfile tls.ext -out tls.crt 2>/dev/null
    rm -f tls.csr tls.ext ca.srl
  ) || die "openssl failed to generate Kueue's certificate in $d/certs"
  cp "$d/certs/tls.crt" "$d/certs/tls.key" "$d/etc-upper/kueue/metrics/certs/"
}

# Kueue's Configuration (config.kueue.x-k8s.io/v1beta2; JSON is YAML). E2E_KUEUE_CONFIG replaces the defaults
# below; the fields that tie Kueue to this harness are always set here.
write_kueue_config() {
  python3 - "$KUEUE_DIR/config.yaml" "${E2E_KUEUE_CONFIG:-}" "$KUEUE_WEBHOOK_PORT" "$KUEUE_HEALTH_PORT" \
    "$KUEUE_DIR/certs" "$KUEUE_LABEL" <<'PY'
import json, sys
out, base, wport, hport, certs, label = sys.argv[1:]
cfg = json.load(open(base)) if base else {
    # the pod and batch/job integrations; DRA quota (KEP-2941, alpha gate DynamicResourceAllocation) through
    # deviceClassMappings for the NVIDIA DeviceClasses; no on-demand visibility server (own certificate and port)
    "integrations": {"frameworks": ["batch/job", "pod"]},
    "featureGates": {"DynamicResourceAllocation": True, "VisibilityOnDemand": False},
    "resources": {"deviceClassMappings": [
        {"name": "whole-gpus", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "mig-devices", "deviceClassNames": ["mig.nvidia.com"]},
    ]},
    "clientConnection": {"qps": 100, "burst": 200},
}
cfg.update({
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "namespace": "kueue-system",
    "manageJobsWithoutQueueName": False,
    "managedJobsNamespaceSelector": {"matchLabels": {label: "true"}},
    "internalCertManagement": {"enable": False},
    "webhook": {"host": "127.0.0.1", "port": int(wport), "certDir": certs},
    "metrics": {"bindAddress": "0"},
    "health": {"healthProbeBindAddress": f"127.0.0.1:{hport}"},
    "leaderElection": {"leaderElect": False},
})
json.dump(cfg, open(out, "w"), indent=1)
PY
  {
    echo '#!/bin/sh'
    echo '# run by unshare --mount: /etc gets an overlay whose upper layer holds kueue/metrics/certs (cluster.sh)'
    echo 'set -e'
    echo "mount -t overlay overlay -o lowerdir=/etc,upperdir=$KUEUE_DIR/etc-upper,workdir=$KUEUE_DIR/etc-work /etc"
    echo 'exec "$@"'
  } > "$KUEUE_DIR/exec.sh"
  chmod +x "$KUEUE_DIR/exec.sh"
}

# The module's webhook configurations (config/components/webhook/manifests.yaml, copied by build.sh) with
# clientConfig.url on 127.0.0.1, the cluster CA as caBundle and, for namespaced objects, only the namespaces
# labelled $KUEUE_LABEL=true (cluster-scoped objects, e.g. ClusterQueues, always go through them).
apply_kueue_webhooks() {
  "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" create --dry-run=client -o json \
    -f "$E2E_BIN_DIR/kueue-config/webhook-manifests.yaml" > "$KUEUE_DIR/webhooks-module.json" ||
    die "cannot read $E2E_BIN_DIR/kueue-config/webhook-manifests.yaml"
  python3 - "$KUEUE_DIR/webhooks-module.json" "$KUEUE_DIR/webhooks.json" "$KUEUE_WEBHOOK_PORT" \
    "$(base64 -w0 < "$RUN/pki/ca.crt")" "$KUEUE_LABEL" <<'PY'
import json, sys
src, out, port, ca, label = sys.argv[1:]
text, dec, pos, items = open(src).read(), json.JSONDecoder(), 0, []
while text[pos:].strip():  # kubectl prints one JSON document per object
    pos += len(text[pos:]) - len(text[pos:].lstrip())
    doc, pos = dec.raw_decode(text, pos)
    items += doc["items"] if doc.get("kind") == "List" else [doc]
for obj in items:
    obj["metadata"]["name"] = "kueue-" + obj["metadata"]["name"]  # as Kueue's release manifests name them
    for wh in obj.get("webhooks") or []:
        path = wh["clientConfig"]["service"]["path"]
        wh["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        wh["namespaceSelector"] = {"matchLabels": {label: "true"}}
        wh["timeoutSeconds"] = 10
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(out, "w"))
PY
  "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" apply -f "$KUEUE_DIR/webhooks.json" >/dev/null ||
    die "cannot apply Kueue's webhook configurations"
}

delete_kueue_webhooks() {
  "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" delete --ignore-not-found --wait=false \
    mutatingwebhookconfiguration/kueue-mutating-webhook-configuration \
    validatingwebhookconfiguration/kueue-validating-webhook-configuration >/dev/null 2>&1 || true
}

install_kueue_crds() {  # server-side: the Workload CRD is too large for kubectl's last-applied annotation
  "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" apply --server-side --force-conflicts \
    --field-manager=dra-scheduler-e2e -f "$E2E_BIN_DIR/kueue-config/crds" >/dev/null ||
    die "cannot install Kueue's CRDs"
  "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" wait --for=condition=Established --timeout=60s \
    -f "$E2E_BIN_DIR/kueue-config/crds" >/dev/null || die "Kueue's CRDs not Established"
}

# The webhooks answer: a server-side dry-run create of a ResourceFlavor goes through Kueue's mutating and
# validating webhooks (failurePolicy Fail), so it succeeds only once the API server reaches them.
wait_kueue_webhooks() {
  local deadline=$(( $(date +%s) + ${1:-60} )) out
  until out=$(printf '{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"e2e-webhook-probe"}}' |
      "$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig" create --dry-run=server -f - 2>&1); do
    [ "$(date +%s)" -lt "$deadline" ] || fail_with_log kueue "Kueue's webhooks do not answer: $out"
    sleep 0.3
  done
}

# Pods Kueue manages carry its finalizer kueue.x-k8s.io/managed; with Kueue stopped nobody would remove it.
drop_kueue_pod_finalizers() {
  local k=("$E2E_BIN_DIR/kubectl" --kubeconfig "$RUN/kubeconfig")
  "${k[@]}" get pods -A -o json 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    fins = p["metadata"].get("finalizers") or []
    if "kueue.x-k8s.io/managed" in fins:
        keep = [f for f in fins if f != "kueue.x-k8s.io/managed"]
        patch = [{"op": "test", "path": "/metadata/finalizers", "value": fins},
                 {"op": "replace", "path": "/metadata/finalizers", "value": keep}]
        print(p["metadata"]["namespace"], p["metadata"]["name"], json.dumps(patch, separators=(",", ":")))' |
  while read -r ns name patch; do
    "${k[@]}" -n "$ns" patch pod "$name" --type=json -p "$patch" >/dev/null 2>&1 || true
  done
}

cmd_kueue_up() {
  need_cluster; need_kueue
  local pid
  if pid=$(pid_of kueue) && probe kueue; then
    log "kueue already running (pid $pid)"
  else
    unshare --mount --propagation private true 2>/dev/null ||
      die "kueue-up needs a private mount namespace (root): Kueue $KUEUE_VERSION reads its metrics certificate from /etc/kueue/metrics/certs"
    local t0; t0=$(now_ms)
    stop_component kueue 0  # a dead or unready one
    mkdir -p "$KUEUE_DIR"
    pick_kueue_ports
    gen_kueue_pki
    write_kueue_config
    install_kueue_crds
    start_component kueue 120
    apply_kueue_webhooks
    wait_kueue_webhooks 60
    log "kueue up in $(elapsed "$t0") (webhooks https://127.0.0.1:$KUEUE_WEBHOOK_PORT, health 127.0.0.1:$KUEUE_HEALTH_PORT)"
    echo "kueue-up $(elapsed "$t0")" >> "$RUN/timings.txt"
  fi
  echo "kueue $KUEUE_VERSION webhooks https://127.0.0.1:$KUEUE_WEBHOOK_PORT config $KUEUE_DIR/config.yaml log $RUN/logs/kueue.log"
}

cmd_kueue_down() {
  need_cluster
  delete_kueue_webhooks
  stop_component kueue 10
  drop_kueue_pod_finalizers
}

# ---- processes ------------------------------------------------------------------------------------
# pid file: "<pid> <binary path>"; a pid is only ours if /proc/<pid>/exe is still that binary.
pid_of() {
  local f=$RUN/pids/$1.pid pid exe
  [ -f "$f" ] || return 1
  read -r pid exe < "$f" || return 1
  [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
  local real; real=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${real% (deleted)}" = "$exe" ] || return 1
  echo "$pid"
}

alive() {  # alive PID: running and not a zombie (killed children of an exited shell may stay zombies
  # until their new parent reaps them)
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

cmdline_of() {
  local c=$1
  case $c in
    etcd) echo "$E2E_BIN_DIR/etcd" --name=e2e --data-dir="$RUN/etcd-data" \
      --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster="e2e=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync \
      --quota-backend-bytes=8589934592 --auto-compaction-mode=periodic --auto-compaction-retention=1h \
      --log-level=warn ;;
    kube-apiserver)
      local extra=""
      [ "${E2E_NO_QPS_LIMITS:-0}" = 1 ] &&
        extra="--max-requests-inflight=0 --max-mutating-requests-inflight=0 --enable-priority-and-fairness=false"
      [ "${E2E_AUDIT_LOG:-0}" = 1 ] &&
        extra+=" --audit-policy-file=$RUN/audit-policy.yaml --audit-log-path=$RUN/audit.log --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=4096"
      echo "$E2E_BIN_DIR/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
      --tls-cert-file="$RUN/pki/apiserver.crt" --tls-private-key-file="$RUN/pki/apiserver.key" \
      --client-ca-file="$RUN/pki/ca.crt" --token-auth-file="$RUN/tokens.csv" \
      --authorization-mode=RBAC --anonymous-auth=true \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --service-account-key-file="$RUN/pki/sa.pub" --service-account-signing-key-file="$RUN/pki/sa.key" \
      --service-cluster-ip-range=10.96.0.0/24 --allow-privileged=true \
      --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
      --endpoint-reconciler-type=none --profiling=false \
      --runtime-config="$RUNTIME_CONFIG" --feature-gates="$FEATURE_GATES" \
      --v="$LOG_V" $extra ;;
    kube-controller-manager) echo "$E2E_BIN_DIR/kube-controller-manager" --kubeconfig="$RUN/kubeconfig" \
      --authentication-kubeconfig="$RUN/kubeconfig" --authentication-skip-lookup=true \
      --authorization-kubeconfig="$RUN/kubeconfig" \
      --controllers=resourceclaim-controller,garbage-collector-controller,namespace-controller,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,job-controller,disruption-controller \
      --leader-elect=false --use-service-account-credentials=false \
      --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$RUN/kcm" \
      --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics \
      --kube-api-qps=500 --kube-api-burst=1000 \
      --feature-gates="$FEATURE_GATES" --v="$LOG_V" ;;
    kube-scheduler) echo "$E2E_BIN_DIR/kube-scheduler" --config="$RUN/kube-scheduler.yaml" \
      --leader-elect=false \
      --authentication-kubeconfig="$RUN/kube-scheduler.kubeconfig" --authentication-skip-lookup=true \
      --authorization-kubeconfig="$RUN/kube-scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$RUN/kube-scheduler" \
      --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics \
      --feature-gates="$FEATURE_GATES" --v="$LOG_V" ;;
    kwok) echo "$E2E_BIN_DIR/kwok" --kubeconfig="$RUN/kubeconfig" --config="$RUN/kwok.yaml" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
      --server-address="127.0.0.1:$KWOK_PORT" ;;
    # the pid file names the kueue binary: exec.sh execs it in the same process (start_component)
    kueue) echo unshare --mount --propagation private "$KUEUE_DIR/exec.sh" "$E2E_BIN_DIR/kueue" \
      --config="$KUEUE_DIR/config.yaml" --kubeconfig="$RUN/kubeconfig" --zap-log-level="${E2E_KUEUE_LOG_LEVEL:-2}" ;;
    *) die "unknown component: $c (etcd kube-apiserver kube-controller-manager kwok kube-scheduler kueue)" ;;
  esac
}

# probe COMPONENT: 0 when it answers healthy/ready
probe() {
  case $1 in
    etcd) curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"' ;;
    kube-apiserver)  # ready, and the system namespaces exist (created by a post-start hook)
      [ "$(curl -sf --max-time 3 --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $TOKEN" \
          "$SERVER/readyz" 2>/dev/null)" = ok ] &&
      curl -sf --max-time 3 --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $TOKEN" \
          "$SERVER/api/v1/namespaces/kube-system" -o /dev/null &&
      curl -sf --max-time 3 --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $TOKEN" \
          "$SERVER/api/v1/namespaces/default" -o /dev/null ;;
    kube-controller-manager) [ "$(curl -skf --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" = ok ] ;;
    kube-scheduler) [ "$(curl -skf --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/readyz" 2>/dev/null)" = ok ] ;;
    kwok) [ "$(curl -sf --max-time 2 "http://127.0.0.1:$KWOK_PORT/healthz" 2>/dev/null)" = ok ] ;;
    kueue) [ -n "${KUEUE_HEALTH_PORT:-}" ] &&
      [ "$(curl -sf --max-time 2 "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz" 2>/dev/null)" = ok ] ;;
  esac
}

fail_with_log() {  # fail_with_log COMPONENT MESSAGE
  local log=$RUN/logs/$1.log
  {
    echo "error: $2"
    echo "---- last 40 lines of $log ----"
    tail -n 40 "$log" 2>/dev/null || true
    echo "---- (run dir $RUN kept for inspection; e2e/cluster.sh down removes it)"
  } >&2
  exit 1
}

start_component() {  # start_component NAME [TIMEOUT_SECONDS]
  local c=$1 timeout=${2:-120} pid t0
  if pid=$(pid_of "$c"); then
    probe "$c" && { log "$c already running (pid $pid)"; return 0; }
  fi
  if [ "$c" = kube-scheduler ]; then pick_scheduler_port; write_kube_scheduler_config; fi
  if [ "$c" = kube-apiserver ] && [ "${E2E_AUDIT_LOG:-0}" = 1 ]; then write_audit_policy; fi
  local -a cmd
  read -r -a cmd <<< "$(cmdline_of "$c")"
  local exe=${cmd[0]}
  [ "$c" != kueue ] || exe=$E2E_BIN_DIR/kueue
  [ -x "$exe" ] || die "missing binary $exe -- run e2e/build.sh"
  t0=$(now_ms)
  { echo "==== $(date -u +%Y-%m-%dT%H:%M:%SZ) starting: ${cmd[*]}"; } >> "$RUN/logs/$c.log"
  setsid "${cmd[@]}" >> "$RUN/logs/$c.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid $exe" > "$RUN/pids/$c.pid"
  local deadline=$(( $(date +%s) + timeout ))
  until probe "$c"; do
    alive "$pid" || fail_with_log "$c" "$c exited during startup"
    [ "$(date +%s)" -lt "$deadline" ] || fail_with_log "$c" "$c not ready after ${timeout}s"
    sleep 0.2
  done
  local e; e=$(elapsed "$t0")
  log "$c ready in $e (pid $pid, log $RUN/logs/$c.log)"
  echo "$c $e" >> "$RUN/timings.txt"
}

# SIGTERM, then SIGKILL after a grace period. kube-apiserver gets 5s: with clients still watching
# (kcm, kwok, the scheduler) its HTTP server waits up to --request-timeout (60s) for the
# connections to close, which only slows restart tests down.
stop_component() {  # stop_component NAME [GRACE_SECONDS]  (0 = SIGKILL at once, like a crash)
  local c=$1 pid i grace=${2:-}
  [ -n "$grace" ] || { [ "$c" = kube-apiserver ] && grace=5 || grace=15; }
  if pid=$(pid_of "$c"); then
    if [ "$grace" -gt 0 ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < grace * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
      done
    fi
    if alive "$pid"; then
      [ "$grace" -gt 0 ] && log "$c (pid $pid) still running ${grace}s after SIGTERM, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
    fi
    log "$c stopped"
  fi
  rm -f "$RUN/pids/$c.pid"
}

# ---- commands -------------------------------------------------------------------------------------
all_healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do
    pid_of "$c" >/dev/null && probe "$c" || return 1
  done
}

cmd_env() {
  load_env || die "no cluster in $RUN (run e2e/cluster.sh up)"
  cat <<EOF
export KUBECONFIG=$KUBECONFIG
export E2E_RUN_DIR=$E2E_RUN_DIR
export E2E_SERVER=$E2E_SERVER
export E2E_TOKEN=$E2E_TOKEN
export E2E_CA_FILE=$E2E_CA_FILE
export PATH=$E2E_BIN_DIR:\$PATH
EOF
}

cmd_up() {
  need_binaries
  command -v openssl >/dev/null || die "openssl is required"
  command -v curl >/dev/null || die "curl is required"
  if [ -e "$MARKER" ] && load_env && all_healthy; then
    log "cluster already up in $RUN"
    echo "KUBECONFIG=$RUN/kubeconfig"
    return 0
  fi
  if [ -e "$RUN" ]; then
    log "cleaning up a stale or partial cluster in $RUN"
    cmd_down
  fi
  local t0; t0=$(now_ms)
  choose_ports
  prepare_run_dir
  gen_pki
  write_configs
  log "run dir $RUN; ports etcd=$ETCD_PORT apiserver=$APISERVER_PORT kcm=$KCM_PORT kwok=$KWOK_PORT"
  local c
  for c in "${COMPONENTS[@]}"; do start_component "$c"; done
  log "cluster up in $(elapsed "$t0") (Kubernetes v$K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION)"
  echo "total $(elapsed "$t0")" >> "$RUN/timings.txt"
  echo "KUBECONFIG=$RUN/kubeconfig"
}

cmd_down() {
  if [ ! -e "$RUN" ]; then log "no cluster in $RUN"; return 0; fi
  [ -e "$MARKER" ] || die "$RUN was not created by e2e/cluster.sh; not touching it"
  load_env || true
  # The run dir (etcd data included) is thrown away, so nothing needs a graceful shutdown: SIGKILL
  # all at once. (SIGTERM would make kube-apiserver wait for its clients' watch connections.)
  local c pid i
  for c in kueue kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    if pid=$(pid_of "$c"); then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
      log "$c (pid $pid) stopped"
    fi
  done
  rm -rf "$RUN"
  log "cluster down, $RUN removed"
}

cmd_status() {
  [ -e "$MARKER" ] && load_env || { echo "no cluster in $RUN"; return 1; }
  local rc=0 c pid state
  for c in "${COMPONENTS[@]}" kube-scheduler kueue; do
    if pid=$(pid_of "$c"); then
      if probe "$c"; then state="ready (pid $pid)"; else state="NOT READY (pid $pid)"; rc=1; fi
    else
      state="not running"
      [ "$c" = kube-scheduler ] || [ "$c" = kueue ] || rc=1
    fi
    printf '%-24s %s\n' "$c" "$state"
  done
  echo "KUBECONFIG=$KUBECONFIG"
  echo "server=$E2E_SERVER"
  return $rc
}

need_cluster() { [ -e "$MARKER" ] && load_env || die "no cluster in $RUN (run e2e/cluster.sh up)"; }

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  restart-apiserver)
    need_cluster
    stop_component kube-apiserver "${3:-}"
    sleep "${2:-0}"
    start_component kube-apiserver ;;
  kube-scheduler-up)
    need_cluster; need_binaries; start_component kube-scheduler
    echo "kube-scheduler (schedulerName default-scheduler) https://127.0.0.1:$SCHEDULER_PORT log $RUN/logs/kube-scheduler.log" ;;
  kube-scheduler-down) need_cluster; stop_component kube-scheduler ;;
  kueue-up) cmd_kueue_up ;;
  kueue-down) cmd_kueue_down ;;
  stop) need_cluster; stop_component "${2:?component}" ;;
  start) need_cluster; need_binaries; start_component "${2:?component}" ;;
  restart) need_cluster; stop_component "${2:?component}"; sleep "${3:-0}"; start_component "${2}" ;;
  -h|--help|help|"") sed -n '2,/^set -euo/p' "$0" | sed '$d' ;;
  *) die "unknown command: $1 (up|down|status|env|restart-apiserver|kube-scheduler-up|kube-scheduler-down|kueue-up|kueue-down|stop|start|restart)" ;;
esac
