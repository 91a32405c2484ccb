# The two HTTP pairs of the HTTP benchmarks (bench/http-pair.sh,
# bench/http-callgrind.sh), set up side by side: the app (`http-load serve`,
# 1 KiB body), the haproxy pair in `mode http` (mTLS, HTTP/2 between A and
# B) and one meshlink-cp configuring a client sidecar (A) with outbounds to
# a `tcp` server sidecar (BT) and an `http` one (BH). Sourced, not run; the
# caller sets BIN, WORK, PIDS, sources bench/lib/{proc,cp,certs}.sh, and may
# set WRAP_PROXY (a command prefix for the four proxies, e.g. valgrind),
# WAIT_SECS (how long set-up may take, 60 by default) and PORT_BASE.
# http_pair_setup sets APP_PID, HA_A_PID, HA_B_PID, ML_A_PID, ML_BT_PID,
# ML_BH_PID and the ports below; target_of and pids_of name, per variant
# (direct, haproxy-http, meshlink-tcp, meshlink-http), where the client
# connects and which proxies (A and B) carry it.

# install_missing TOOL...: installs the tools not on PATH with apt-get
# (h2load comes with nghttp2-client, dnsmasq with dnsmasq-base: the daemon
# alone, no system service).
install_missing() {
    local missing=() tool
    for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
    if [[ ${#missing[@]} -gt 0 ]]; then
        local pkgs=("${missing[@]/h2load/nghttp2-client}")
        pkgs=("${pkgs[@]/#dnsmasq/dnsmasq-base}")
        echo "installing ${pkgs[*]} with apt-get" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
    fi
}

# build_release: the release binaries both benchmarks run; sets BIN.
build_release() {
    cargo build --release -q --bins -p meshlink-bench -p meshlink-cp -p meshlink -p meshlink-proxy
    BIN="$CARGO_TARGET_DIR/release"
}

# Fixed ports below the ephemeral range.
PORT_BASE="${PORT_BASE:-28830}"
APP_PORT=$PORT_BASE
HA_A_PORT=$((PORT_BASE + 1))
HA_B_PORT=$((PORT_BASE + 2))
TCP_OUT=$((PORT_BASE + 3))  # client sidecar's outbound to server-tcp
HTTP_OUT=$((PORT_BASE + 4)) # client sidecar's outbound to server-http
TCP_IN=$((PORT_BASE + 5))   # server-tcp sidecar's inbound
HTTP_IN=$((PORT_BASE + 6))  # server-http sidecar's inbound
CLIENT_IN=$((PORT_BASE + 7))
API_PORT=$((PORT_BASE + 8))
XDS_PORT=$((PORT_BASE + 9))
ADMIN_A=127.0.0.1:$((PORT_BASE + 10))
ADMIN_BT=127.0.0.1:$((PORT_BASE + 11))
ADMIN_BH=127.0.0.1:$((PORT_BASE + 12))
SINK_PORT=$((PORT_BASE + 13)) # the trace collector of the +trace variant


# http_pair_setup: starts everything and waits until a request crosses each pair.
http_pair_setup() {
    # shellcheck disable=SC2206 # WRAP_PROXY is a command line, split on spaces
    local wrap=(${WRAP_PROXY:-})
    local secs="${WAIT_SECS:-60}"
    start APP "$BIN/http-load" serve --addr "127.0.0.1:$APP_PORT" --body-bytes 1024
    wait_for "the app" 10 curl -fs "http://127.0.0.1:$APP_PORT/"

    # === haproxy, mode http ===
    make_certs "$WORK/certs"
    export BENCH_CERTS="$WORK/certs" BENCH_HAPROXY_HTTP_A_PORT=$HA_A_PORT BENCH_HAPROXY_HTTP_B_PORT=$HA_B_PORT BENCH_APP_PORT=$APP_PORT
    haproxy -c -q -f bench/haproxy/a-http.cfg
    haproxy -c -q -f bench/haproxy/b-http.cfg
    start HA_B "${wrap[@]}" haproxy -db -f bench/haproxy/b-http.cfg
    start HA_A "${wrap[@]}" haproxy -db -f bench/haproxy/a-http.cfg
    wait_for "a request through the haproxy pair" "$secs" curl -fs "http://127.0.0.1:$HA_A_PORT/"

    # === meshlink: one control plane, both pairs ===
    start_cp "$WORK/cp-data" "$WORK/CP.log"
    PIDS+=("$CP_PID")
    cat >"$WORK/mesh.yaml" <<EOF
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: bench}
spec:
  mtls:
    enabledBackend: ca-1
    backends: [{name: ca-1, type: builtin}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: client-1, mesh: bench}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: $CLIENT_IN, servicePort: $((CLIENT_IN + 100)), tags: {kuma.io/service: client}}]
    outbound:
      - {port: $TCP_OUT, tags: {kuma.io/service: server-tcp}}
      - {port: $HTTP_OUT, tags: {kuma.io/service: server-http}}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: server-tcp-1, mesh: bench}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: $TCP_IN, servicePort: $APP_PORT, tags: {kuma.io/service: server-tcp}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: server-http-1, mesh: bench}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: $HTTP_IN, servicePort: $APP_PORT, tags: {kuma.io/service: server-http, kuma.io/protocol: http}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: client-to-servers, mesh: bench}
spec:
  targetRef: {kind: Mesh}
  from: [{targetRef: {kind: MeshService, name: client}, default: {action: Allow}}]
EOF
    cli=("$BIN/meshlink" --server "http://127.0.0.1:$API_PORT" --token "$(cat "$WORK/cp-data/admin-token")")
    "${cli[@]}" apply -f "$WORK/mesh.yaml" >"$WORK/apply.log"
    common=(run --mode sidecar --cp "https://127.0.0.1:$XDS_PORT" --cp-ca "$WORK/cp-data/cp-tls/ca.pem" --mesh bench)
    for p in "A client-1 $ADMIN_A" "BT server-tcp-1 $ADMIN_BT" "BH server-http-1 $ADMIN_BH"; do
        read -r var name admin <<<"$p"
        "${cli[@]}" token dataplane --mesh bench --name "$name" >"$WORK/$name.token"
        RUST_LOG="${RUST_LOG:-warn}" start "ML_$var" "${wrap[@]}" "$BIN/meshlink-proxy" "${common[@]}" --name "$name" \
            --token-file "$WORK/$name.token" --admin-addr "$admin"
    done
    for admin in "$ADMIN_A" "$ADMIN_BT" "$ADMIN_BH"; do
        wait_for "meshlink-proxy $admin /ready" "$secs" curl -fs "http://$admin/ready"
    done
    wait_for "a request through the meshlink tcp pair" "$secs" curl -fs "http://127.0.0.1:$TCP_OUT/"
    wait_for "a request through the meshlink http pair" "$secs" curl -fs "http://127.0.0.1:$HTTP_OUT/"
}

# The policy variants of the meshlink http pair (issue 36): the same pair
# with one policy applied (policy_on), measured, and removed (policy_off)
# before the next variant:
#   meshlink-http+accesslog  a MeshAccessLog writing a JSON line of eight
#                            fields per request to a file on both sidecars
#                            (A's outbound, BH's inbound);
#   meshlink-http+trace      a MeshTrace sampling 100 % of requests, spans
#                            exported over OTLP/HTTP to bench/lib/otlp-sink.py
#                            (both sidecars record a span per request);
#   meshlink-http+faultmiss  a MeshFaultInjection delaying 10 % of requests
#                            by 5 s, for a caller that does not exist: present
#                            on BH's inbound, matching no request.
# Each waits until both sidecars serve the change (their /config_dump), and
# for the first two until a request shows it (a log line, an exported span).
POLICY_NAME=bench-policy

# dump_has ADMIN FIELD: whether a listener of ADMIN's /config_dump has a
# non-empty FIELD (access_logs, tracing, faults) anywhere in its spec.
dump_has() {
    curl -fs "http://$1/config_dump" |
        jq -e --arg f "$2" '[.listeners[].spec | .. | objects | .[$f]? // empty | select(. != [])] | length > 0' >/dev/null
}
# dump_lacks ADMIN FIELD: the opposite (and ADMIN answers).
dump_lacks() {
    curl -fs "http://$1/config_dump" >/dev/null && ! dump_has "$@"
}
# metric ADMIN NAME: the value of a counter in ADMIN's /metrics (0 if absent).
metric() {
    curl -fs "http://$1/metrics" | awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'
}
# spans_exported_past N: whether A and BH together exported more than N spans.
spans_exported_past() {
    curl -fs "http://127.0.0.1:$HTTP_OUT/" >/dev/null
    (($(metric "$ADMIN_A" meshlink_proxy_trace_spans_exported_total) + $(metric "$ADMIN_BH" meshlink_proxy_trace_spans_exported_total) > $1))
}

# policy_yaml VARIANT: the policy of a policy variant.
policy_yaml() {
    local head="type: %s\nname: $POLICY_NAME\nmesh: bench\nspec:\n  targetRef: {kind: Mesh}\n"
    case "$1" in
    *+accesslog)
        local json='[{key: start_time, value: "%START_TIME%"}, {key: code, value: "%RESPONSE_CODE%"}, {key: duration, value: "%DURATION%"}, {key: method, value: "%REQ(:METHOD)%"}, {key: path, value: "%REQ(:PATH)%"}, {key: source, value: "%KUMA_SOURCE_SERVICE%"}, {key: destination, value: "%KUMA_DESTINATION_SERVICE%"}, {key: upstream, value: "%UPSTREAM_HOST%"}]'
        local side
        # shellcheck disable=SC2059 # the head is the format
        printf "$head" MeshAccessLog
        for side in in out; do
            local backend="{backends: [{type: File, file: {path: $WORK/access-$side.log, format: {type: Json, json: $json}}}]}"
            [[ $side == in ]] && printf '  from: [{targetRef: {kind: Mesh}, default: %s}]\n' "$backend"
            [[ $side == out ]] && printf '  to: [{targetRef: {kind: Mesh}, default: %s}]\n' "$backend"
        done
        ;;
    *+trace)
        # shellcheck disable=SC2059
        printf "$head" MeshTrace
        printf '  default:\n    backends: [{type: OpenTelemetry, openTelemetry: {endpoint: "http://127.0.0.1:%s/v1/traces"}}]\n' "$SINK_PORT"
        printf '    sampling: {overall: 100, client: 100, random: 100}\n'
        ;;
    *+faultmiss)
        # shellcheck disable=SC2059
        printf "$head" MeshFaultInjection
        printf '  from: [{targetRef: {kind: MeshService, name: nobody}, default: {http: [{delay: {value: 5s, percentage: 10}}]}}]\n'
        ;;
    esac
}
# policy_kind VARIANT: the kind policy_yaml writes, as the CLI names it.
policy_kind() {
    case "$1" in
    *+accesslog) echo meshaccesslog ;;
    *+trace) echo meshtrace ;;
    *+faultmiss) echo meshfaultinjection ;;
    esac
}
# policy_field VARIANT: the config_dump field the policy sets.
policy_field() {
    case "$1" in
    *+accesslog) echo access_logs ;;
    *+trace) echo tracing ;;
    *+faultmiss) echo faults ;;
    esac
}

# policy_on VARIANT: applies the variant's policy and waits until it works.
policy_on() {
    local v="$1" secs="${WAIT_SECS:-60}" field
    [[ $v == *+* ]] || return 0
    [[ $v == *+trace && -z "${SINK_PID:-}" ]] && start SINK python3 bench/lib/otlp-sink.py "$SINK_PORT"
    policy_yaml "$v" >"$WORK/policy.yaml"
    "${cli[@]}" apply -f "$WORK/policy.yaml" >>"$WORK/apply.log"
    field=$(policy_field "$v")
    # The fault filter is on BH's inbound only (A's inbound is tcp).
    [[ $v == *+faultmiss ]] || wait_for "$v on A" "$secs" dump_has "$ADMIN_A" "$field"
    wait_for "$v on BH" "$secs" dump_has "$ADMIN_BH" "$field"
    case "$v" in
    *+accesslog)
        wait_for "access log lines on both sides" "$secs" bash -c \
            "curl -fs http://127.0.0.1:$HTTP_OUT/ >/dev/null && test -s $WORK/access-in.log && test -s $WORK/access-out.log"
        ;;
    *+trace)
        local before
        before=$(($(metric "$ADMIN_A" meshlink_proxy_trace_spans_exported_total) + $(metric "$ADMIN_BH" meshlink_proxy_trace_spans_exported_total)))
        wait_for "spans exported to the sink" "$secs" spans_exported_past "$((before + 1))"
        ;;
    esac
}
# policy_off VARIANT: deletes the variant's policy and waits until neither
# sidecar has it.
policy_off() {
    local v="$1" secs="${WAIT_SECS:-60}" field
    [[ $v == *+* ]] || return 0
    "${cli[@]}" delete "$(policy_kind "$v")" "$POLICY_NAME" -m bench >>"$WORK/apply.log"
    field=$(policy_field "$v")
    wait_for "$v gone from A" "$secs" dump_lacks "$ADMIN_A" "$field"
    wait_for "$v gone from BH" "$secs" dump_lacks "$ADMIN_BH" "$field"
}

# target_of VARIANT: host:port the client sends to.
target_of() {
    case "$1" in
    direct) echo "127.0.0.1:$APP_PORT" ;;
    haproxy-http) echo "127.0.0.1:$HA_A_PORT" ;;
    meshlink-tcp) echo "127.0.0.1:$TCP_OUT" ;;
    meshlink-http*) echo "127.0.0.1:$HTTP_OUT" ;;
    esac
}
# pids_of VARIANT: the PIDs of its proxies A and B (none for direct).
# shellcheck disable=SC2153 # set by http_pair_setup
pids_of() {
    case "$1" in
    haproxy-http) echo "$HA_A_PID $HA_B_PID" ;;
    meshlink-tcp) echo "$ML_A_PID $ML_BT_PID" ;;
    meshlink-http*) echo "$ML_A_PID $ML_BH_PID" ;;
    esac
}
