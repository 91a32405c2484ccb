#!/usr/bin/env bash
# Data-plane proxy benchmark, three variants side by side in one run, all on
# loopback:
#   direct    client -> server (the physical limit)
#   haproxy   client -> haproxy A -> mTLS (TLS 1.3, ECDSA P-256) -> haproxy B -> server
#   meshlink  client -> meshlink-proxy A (outbound) -> mTLS -> meshlink-proxy B (inbound) -> server,
#             configured by a real meshlink-cp (Mesh with mTLS, two Dataplanes,
#             a MeshTrafficPermission allowing client -> server)
#   link      client -> router B (Listener) -> TLS 1.3 link -> router A (Connector) -> server:
#             two sites, each a real meshlink-cp and a `meshlink-proxy --mode
#             router`, linked with `meshlink token issue` / `token redeem`
#             (not in the default VARIANTS; bench/link-pair.sh runs it)
# Figures, for each round and variant (rounds interleave the variants):
#   - latency p50/p99/p99.9 at a fixed 1,000 req/s over 10 HTTP/1.1 keep-alive
#     connections (`http-load latency`: open loop, measured from when each
#     request was due, so stalls are not hidden),
#   - new connections per second (`http-load connect`: 8 workers, one request
#     per connection, `Connection: close`),
#   - single-flow throughput (`iperf3 -P 1`, after all HTTP rounds), and
#     the proxies' CPU per MiB received over that run,
#   - proxy RSS (VmRSS) idle after start, max during the latency run, and
#     with 1,000 connections held open (`http-load hold`; meshlink and link), and
#     proxy CPU (utime+stime from /proc/PID/stat) during the latency run
#     (scaled to 1,000 req/s) and per connection during the connection run.
# Prints a markdown table of medians over the rounds, with ratios.
#
#   bench/proxy-pair.sh
#
# Environment: ROUNDS (default 3), VARIANTS (default "direct haproxy meshlink"),
# LAT_DURATION (20s), CONN_DURATION (10s), IPERF_SECONDS (10), RATE (1000),
# PORT_BASE (27830; the 18 ports from it), LK_A_HOST / LK_B_HOST (127.0.0.3 /
# 127.0.0.4, the link sites' addresses), PROXY_PAIR_OUT (copy the raw JSON lines there), PROXY_PAIR_KEEP=1 (keep
# the work dir with certificates and logs). Needs haproxy, iperf3, jq and
# openssl; installs the missing ones with apt-get. No figure is checked
# against a threshold: this is a benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
read -r -a VARIANTS <<<"${VARIANTS:-direct haproxy meshlink}"
LAT_DURATION="${LAT_DURATION:-20s}"
CONN_DURATION="${CONN_DURATION:-10s}"
IPERF_SECONDS="${IPERF_SECONDS:-10}"
RATE="${RATE:-1000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"

missing=()
for tool in haproxy iperf3 jq openssl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "installing ${missing[*]} with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [[ " ${VARIANTS[*]} " == *" meshlink "* || " ${VARIANTS[*]} " == *" link "* ]]; then
    cargo build --release -q --bins -p meshlink-bench -p meshlink-cp -p meshlink -p meshlink-proxy
else
    cargo build --release -q -p meshlink-bench --bin http-load
fi
BIN="$CARGO_TARGET_DIR/release"

# Fixed ports below the ephemeral range (32768+): a port there can be taken by
# a connection (even a TCP self-connect while polling a port not yet bound).
PORT_BASE="${PORT_BASE:-27830}" # 18 ports from here; change it to run beside another copy
APP_PORT=$PORT_BASE                 # the app: http-load serve, later iperf3 -s
HA_A_PORT=$((PORT_BASE + 1))        # haproxy A, plain TCP from the client
HA_B_PORT=$((PORT_BASE + 2))        # haproxy B, mTLS from A
ML_A_PORT=$((PORT_BASE + 3))        # meshlink-proxy A outbound (plain TCP from the client)
ML_B_PORT=$((PORT_BASE + 4))        # meshlink-proxy B inbound (mTLS from A)
ML_A_IN_PORT=$((PORT_BASE + 5))     # meshlink-proxy A inbound (unused; a Dataplane has one)
CP_API_PORT=$((PORT_BASE + 7))
CP_XDS_PORT=$((PORT_BASE + 8))
ML_A_ADMIN=127.0.0.1:$((PORT_BASE + 9))
ML_B_ADMIN=127.0.0.1:$((PORT_BASE + 10))
LK_A_API=$((PORT_BASE + 11))         # link variant: site A (Connector; accepts the link on $LK_A_HOST:55671)
LK_A_XDS=$((PORT_BASE + 12))
LK_B_API=$((PORT_BASE + 13))         # site B (Listener; dials the link)
LK_B_XDS=$((PORT_BASE + 14))
LK_LISTEN=$((PORT_BASE + 15))        # router B's Listener (plain TCP from the client)
LK_A_ADMIN=127.0.0.1:$((PORT_BASE + 16))
LK_B_ADMIN=127.0.0.1:$((PORT_BASE + 17))
LK_A_HOST="${LK_A_HOST:-127.0.0.3}" # site A's router binds the link port 55671 here
LK_B_HOST="${LK_B_HOST:-127.0.0.4}"
HOLD_COUNT="${HOLD_COUNT:-1000}"
# Every held connection is a socket in the client and in each proxy.
ulimit -n 65536 2>/dev/null || true

WORK="$(mktemp -d /tmp/proxy-pair.XXXXXX)"
RESULTS="$WORK/results.jsonl"
PIDS=()
KEEP_WORK="${PROXY_PAIR_KEEP:-0}"
# shellcheck source=bench/lib/proc.sh
source bench/lib/proc.sh
trap cleanup_work EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
CLK_TCK=$(getconf CLK_TCK)
cpu_ms() { awk -v hz="$CLK_TCK" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$1/stat"; }
now_ms() { date +%s%3N; }
emit() { echo "$1" >>"$RESULTS"; }

# === the app ===
start APP "$BIN/http-load" serve --addr "127.0.0.1:$APP_PORT"
wait_for "the app on :$APP_PORT" 10 port_open "$APP_PORT"

# === haproxy pair ===
# shellcheck source=bench/lib/certs.sh
source bench/lib/certs.sh
setup_haproxy() {
    make_certs "$WORK/certs"
    export BENCH_CERTS="$WORK/certs" BENCH_HAPROXY_A_PORT=$HA_A_PORT BENCH_HAPROXY_B_PORT=$HA_B_PORT BENCH_APP_PORT=$APP_PORT
    haproxy -c -q -f bench/haproxy/a.cfg
    haproxy -c -q -f bench/haproxy/b.cfg
    start HA_B haproxy -db -f bench/haproxy/b.cfg
    start HA_A haproxy -db -f bench/haproxy/a.cfg
    wait_for "haproxy B" 10 port_open "$HA_B_PORT"
    wait_for "haproxy A" 10 port_open "$HA_A_PORT"
    wait_for "a request through the haproxy pair" 10 curl -fs "http://127.0.0.1:$HA_A_PORT/"
}

# === meshlink pair ===
ML_FAILED=""
meshlink_setup_failed() {
    ML_FAILED="$1"
    echo "meshlink variant skipped: $1" >&2
    for p in ML_A ML_B; do
        local admin=$ML_A_ADMIN
        [[ $p == ML_B ]] && admin=$ML_B_ADMIN
        echo "--- $p /ready: $(curl -s "http://$admin/ready" || echo unreachable)" >&2
        echo "--- $p log (last 40 lines):" >&2
        tail -n 40 "$WORK/$p.log" >&2 2>/dev/null || true
    done
    echo "--- meshlink-cp log (last 20 lines):" >&2
    tail -n 20 "$WORK/CP.log" >&2 || true
    [[ -n "${ML_A_PID:-}" ]] && stop "$ML_A_PID"
    [[ -n "${ML_B_PID:-}" ]] && stop "$ML_B_PID"
    return 0
}
setup_meshlink() {
    local dir="$WORK/cp-data"
    RUST_LOG="${RUST_LOG:-warn}" start CP "$BIN/meshlink-cp" run --data-dir "$dir" \
        --api-addr "127.0.0.1:$CP_API_PORT" --xds-addr "127.0.0.1:$CP_XDS_PORT" --grant-addr 127.0.0.1:0
    wait_for "meshlink-cp /readyz" 30 curl -fs "http://127.0.0.1:$CP_API_PORT/readyz"
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
    inbound: [{port: $ML_A_IN_PORT, servicePort: $((ML_A_IN_PORT + 1)), tags: {kuma.io/service: client}}]
    outbound: [{port: $ML_A_PORT, tags: {kuma.io/service: server}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: server-1, mesh: bench}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: $ML_B_PORT, servicePort: $APP_PORT, tags: {kuma.io/service: server}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: client-to-server, mesh: bench}
spec:
  targetRef: {kind: MeshService, name: server}
  from: [{targetRef: {kind: MeshService, name: client}, default: {action: Allow}}]
EOF
    local cli=("$BIN/meshlink" --server "http://127.0.0.1:$CP_API_PORT" --token "$(cat "$dir/admin-token")")
    "${cli[@]}" apply -f "$WORK/mesh.yaml" >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log" >&2; return 1; }
    "${cli[@]}" token dataplane --mesh bench --name client-1 >"$WORK/client-1.token" 2>>"$WORK/apply.log"
    "${cli[@]}" token dataplane --mesh bench --name server-1 >"$WORK/server-1.token" 2>>"$WORK/apply.log"
    local common=(run --mode sidecar --cp "https://127.0.0.1:$CP_XDS_PORT" --cp-ca "$dir/cp-tls/ca.pem" --mesh bench)
    RUST_LOG="${RUST_LOG:-warn}" start ML_B "$BIN/meshlink-proxy" "${common[@]}" --name server-1 \
        --token-file "$WORK/server-1.token" --admin-addr "$ML_B_ADMIN"
    RUST_LOG="${RUST_LOG:-warn}" start ML_A "$BIN/meshlink-proxy" "${common[@]}" --name client-1 \
        --token-file "$WORK/client-1.token" --admin-addr "$ML_A_ADMIN"
    wait_for "meshlink-proxy B /ready" 60 curl -fs "http://$ML_B_ADMIN/ready" || return 1
    wait_for "meshlink-proxy A /ready" 60 curl -fs "http://$ML_A_ADMIN/ready" || return 1
    wait_for "a request through the meshlink pair" 30 curl -fs "http://127.0.0.1:$ML_A_PORT/" || return 1
}

# === link: two sites, a router each ===
LK_FAILED=""
setup_link() {
    local site
    for site in a b; do
        local host=$LK_A_HOST api=$LK_A_API xds=$LK_A_XDS
        [[ $site == b ]] && { host=$LK_B_HOST; api=$LK_B_API; xds=$LK_B_XDS; }
        local dir="$WORK/lk-$site"
        RUST_LOG="${RUST_LOG:-warn}" start "LKCP_${site^^}" "$BIN/meshlink-cp" run --data-dir "$dir" \
            --api-addr "127.0.0.1:$api" --xds-addr "127.0.0.1:$xds" --grant-addr "$host:0" --advertised-host "$host"
        wait_for "site $site meshlink-cp /readyz" 30 curl -fs "http://127.0.0.1:$api/readyz" || return 1
        local cli=("$BIN/meshlink" --server "http://127.0.0.1:$api" --token "$(cat "$dir/admin-token")")
        printf 'apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: bench-%s}\nspec: {linkAccess: default}\n' "$site" |
            "${cli[@]}" apply -f - >>"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log" >&2; return 1; }
        "${cli[@]}" token router >"$WORK/lk-$site.token" 2>>"$WORK/apply.log"
        local admin=$LK_A_ADMIN
        [[ $site == b ]] && admin=$LK_B_ADMIN
        RUST_LOG="${RUST_LOG:-warn}" start "LK_${site^^}" "$BIN/meshlink-proxy" run --mode router \
            --cp "https://127.0.0.1:$xds" --cp-ca "$dir/cp-tls/ca.pem" --token-file "$WORK/lk-$site.token" \
            --bind-host "$host" --admin-addr "$admin"
        wait_for "router $site /ready" 60 curl -fs "http://$admin/ready" || return 1
    done
    local cli_a=("$BIN/meshlink" --server "http://127.0.0.1:$LK_A_API" --token "$(cat "$WORK/lk-a/admin-token")")
    local cli_b=("$BIN/meshlink" --server "http://127.0.0.1:$LK_B_API" --token "$(cat "$WORK/lk-b/admin-token")")
    "${cli_a[@]}" token issue "$WORK/lk-token.yaml" >>"$WORK/apply.log" 2>&1 || return 1
    "${cli_b[@]}" token redeem "$WORK/lk-token.yaml" --link-timeout 60s >>"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log" >&2; return 1; }
    printf 'apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {name: app}\nspec: {routingKey: app, host: 127.0.0.1, port: %s}\n' "$APP_PORT" |
        "${cli_a[@]}" apply -f - >>"$WORK/apply.log" 2>&1 || return 1
    printf 'apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {name: app}\nspec: {routingKey: app, host: 127.0.0.1, port: %s}\n' "$LK_LISTEN" |
        "${cli_b[@]}" apply -f - >>"$WORK/apply.log" 2>&1 || return 1
    wait_for "a request through the link" 60 curl -fs "http://127.0.0.1:$LK_LISTEN/" || return 1
}
link_setup_failed() {
    LK_FAILED="$1"
    echo "link variant skipped: $1" >&2
    for p in LK_A LK_B LKCP_A LKCP_B; do
        echo "--- $p log (last 30 lines):" >&2
        tail -n 30 "$WORK/$p.log" >&2 2>/dev/null || true
    done
    return 0
}

target_of() {
    case "$1" in
    direct) echo "127.0.0.1:$APP_PORT" ;;
    haproxy) echo "127.0.0.1:$HA_A_PORT" ;;
    meshlink) echo "127.0.0.1:$ML_A_PORT" ;;
    link) echo "127.0.0.1:$LK_LISTEN" ;;
    esac
}
# proxy_pids VARIANT: "A_PID B_PID", or nothing for direct (start() sets them).
# shellcheck disable=SC2153
proxy_pids() {
    case "$1" in
    haproxy) echo "$HA_A_PID $HA_B_PID" ;;
    meshlink) echo "$ML_A_PID $ML_B_PID" ;;
    link) echo "$LK_B_PID $LK_A_PID" ;;
    esac
}
enabled() {
    [[ " ${VARIANTS[*]} " == *" $1 "* && ! ($1 == meshlink && -n "$ML_FAILED") && ! ($1 == link && -n "$LK_FAILED") ]]
}

# hold_round VARIANT: RSS of both proxies (max over 1 s) with HOLD_COUNT
# connections held open through them.
hold_round() {
    local v="$1" a b max_a=0 max_b=0
    read -r a b <<<"$(proxy_pids "$v")"
    : >"$WORK/hold.json"
    "$BIN/http-load" hold --target "$(target_of "$v")" --count "$HOLD_COUNT" --hold 30s \
        --tag "variant=$v" </dev/null >"$WORK/hold.json" &
    local hold=$!
    PIDS+=("$hold")
    if ! wait_for "$HOLD_COUNT connections held through $v" 120 test -s "$WORK/hold.json"; then
        stop "$hold"
        return 0
    fi
    for _ in 1 2 3 4 5; do
        local x y
        x=$(rss_kb "$a") y=$(rss_kb "$b")
        ((x > max_a)) && max_a=$x
        ((y > max_b)) && max_b=$y
        sleep 0.2
    done
    emit "$(cat "$WORK/hold.json")"
    emit "{\"variant\":\"$v\",\"rss_hold_a_kib\":$max_a,\"rss_hold_b_kib\":$max_b}"
    stop "$hold"
}

# latency_round VARIANT ROUND: the latency run, with proxy RSS sampled every
# 0.2 s (max kept) and proxy CPU over the whole run.
latency_round() {
    local v="$1" r="$2" a b
    read -r a b <<<"$(proxy_pids "$v")"
    local cpu_a0 cpu_b0 t0 max_a=0 max_b=0
    [[ -n "$a" ]] && { cpu_a0=$(cpu_ms "$a"); cpu_b0=$(cpu_ms "$b"); }
    t0=$(now_ms)
    "$BIN/http-load" latency --target "$(target_of "$v")" --rate "$RATE" --duration "$LAT_DURATION" \
        --tag "variant=$v" --tag "round=$r" >"$WORK/lat.json" &
    local load=$!
    PIDS+=("$load")
    while kill -0 "$load" 2>/dev/null; do
        if [[ -n "$a" ]]; then
            local x y
            x=$(rss_kb "$a") y=$(rss_kb "$b")
            ((x > max_a)) && max_a=$x
            ((y > max_b)) && max_b=$y
        fi
        sleep 0.2
    done
    if ! wait "$load"; then
        echo "latency run through $v failed" >&2
        return 0
    fi
    emit "$(cat "$WORK/lat.json")"
    if [[ -n "$a" ]]; then
        emit "{\"variant\":\"$v\",\"round\":$r,\"rss_load_a_kib\":$max_a,\"rss_load_b_kib\":$max_b,\"cpu_a_ms\":$(($(cpu_ms "$a") - cpu_a0)),\"cpu_b_ms\":$(($(cpu_ms "$b") - cpu_b0)),\"cpu_wall_ms\":$(($(now_ms) - t0))}"
    fi
}

# connect_round VARIANT ROUND: the connection-rate run, with the proxies'
# CPU per completed connection.
connect_round() {
    local v="$1" r="$2" a b cpu0
    read -r a b <<<"$(proxy_pids "$v")"
    [[ -n "$a" ]] && cpu0=$(($(cpu_ms "$a") + $(cpu_ms "$b")))
    if ! "$BIN/http-load" connect --target "$(target_of "$v")" --duration "$CONN_DURATION" \
        --tag "variant=$v" --tag "round=$r" >"$WORK/conn.json"; then
        echo "connection run through $v failed" >&2
        return 0
    fi
    emit "$(cat "$WORK/conn.json")"
    if [[ -n "$a" ]]; then
        local used=$(($(cpu_ms "$a") + $(cpu_ms "$b") - cpu0)) count
        count=$(jq .conn_count "$WORK/conn.json")
        emit "{\"variant\":\"$v\",\"round\":$r,\"cpu_per_conn_us\":$((used * 1000 / count))}"
    fi
}

echo "# meshlink data-plane benchmark: $(nproc) cores, $(date -u +%FT%TZ), rounds $ROUNDS, variants ${VARIANTS[*]}"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
enabled haproxy && setup_haproxy
if enabled meshlink; then
    setup_meshlink || meshlink_setup_failed "setup failed (see above)"
fi
if enabled link; then
    setup_link || link_setup_failed "setup failed (see above)"
fi
for v in haproxy meshlink link; do
    enabled "$v" || continue
    read -r a b <<<"$(proxy_pids "$v")"
    emit "{\"variant\":\"$v\",\"rss_idle_a_kib\":$(rss_kb "$a"),\"rss_idle_b_kib\":$(rss_kb "$b")}"
done

for r in $(seq 1 "$ROUNDS"); do
    for v in "${VARIANTS[@]}"; do
        enabled "$v" || continue
        echo "round $r/$ROUNDS: $v (latency $LAT_DURATION at $RATE req/s, connections $CONN_DURATION)" >&2
        latency_round "$v" "$r"
        connect_round "$v" "$r"
    done
done

for v in meshlink link; do
    enabled "$v" || continue
    echo "$v: $HOLD_COUNT connections held open" >&2
    hold_round "$v"
done

# iperf3 replaces the HTTP app on the same port, so every proxy keeps its config.
stop "$APP_PID"
start IPERF iperf3 -s -p "$APP_PORT"
wait_for "iperf3 -s on :$APP_PORT" 10 port_open "$APP_PORT"
for r in $(seq 1 "$ROUNDS"); do
    for v in "${VARIANTS[@]}"; do
        enabled "$v" || continue
        echo "round $r/$ROUNDS: $v (iperf3 ${IPERF_SECONDS}s)" >&2
        target=$(target_of "$v")
        read -r pa pb <<<"$(proxy_pids "$v")"
        [[ -n "$pa" ]] && cpu0=$(($(cpu_ms "$pa") + $(cpu_ms "$pb")))
        if iperf3 -c 127.0.0.1 -p "${target##*:}" -P 1 -t "$IPERF_SECONDS" -J >"$WORK/iperf.json" 2>&1; then
            emit "{\"variant\":\"$v\",\"round\":$r,\"iperf_bps\":$(jq '.end.sum_received.bits_per_second' "$WORK/iperf.json")}"
            if [[ -n "$pa" ]]; then
                # Both proxies' CPU over the run per MiB the server received.
                used=$(($(cpu_ms "$pa") + $(cpu_ms "$pb") - cpu0))
                bytes=$(jq '.end.sum_received.bytes | floor' "$WORK/iperf.json")
                emit "{\"variant\":\"$v\",\"round\":$r,\"cpu_per_mib_us\":$((used * 1000 * 1048576 / bytes))}"
            fi
        else
            echo "iperf3 through $v failed: $(jq -r '.error // empty' "$WORK/iperf.json" 2>/dev/null | head -c 300)" >&2
        fi
    done
done

echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -n "$ML_FAILED" ]] && echo "# meshlink variant: $ML_FAILED"
[[ -n "$LK_FAILED" ]] && echo "# link variant: $LK_FAILED"
for p in ML_A ML_B HA_A HA_B LK_A LK_B; do
    pid_var="${p}_PID"
    if [[ -n "${!pid_var:-}" ]] && ! kill -0 "${!pid_var}" 2>/dev/null; then
        echo "# $p exited during the run; last log lines:" && tail -n 20 "$WORK/$p.log"
    fi
    if [[ -f "$WORK/$p.log" ]] && grep -qiE "panic|ERROR" "$WORK/$p.log"; then
        echo "# $p logged errors:" && grep -iE "panic|ERROR" "$WORK/$p.log" | sort | uniq -c | sort -rn | head -n 10
    fi
done
# What the meshlink proxies counted: shows the traffic really went through
# them (and through mTLS), and whether anything failed.
if enabled meshlink; then
    for p in A B; do
        admin=$ML_A_ADMIN
        [[ $p == B ]] && admin=$ML_B_ADMIN
        echo "# meshlink-proxy $p: identity $(curl -s "http://$admin/config_dump" | jq -c '.identity | {spiffe_id, not_after}' 2>/dev/null)"
        if ! curl -sS --max-time 5 "http://$admin/metrics" -o "$WORK/ML_$p.metrics" 2>"$WORK/ML_$p.metrics.err"; then
            echo "#   GET /metrics failed: $(cat "$WORK/ML_$p.metrics.err")"
        elif ! grep -E '^meshlink_proxy_(connections_total|handshake_failures_total|rbac_denied_total|upstream_connect_failures_total|bytes_total)' "$WORK/ML_$p.metrics" | sed 's/^/#   /'; then
            echo "#   no traffic counters in /metrics ($(wc -l <"$WORK/ML_$p.metrics") lines):"
            grep -v '^#' "$WORK/ML_$p.metrics" | head -n 10 | sed 's/^/#     /'
        fi
    done
fi
echo
"$BIN/http-load" report <"$RESULTS"
echo
echo "# raw results (JSON lines)"
cat "$RESULTS"
[[ -n "${PROXY_PAIR_OUT:-}" ]] && cp "$RESULTS" "$PROXY_PAIR_OUT"
true
