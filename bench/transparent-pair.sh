#!/usr/bin/env bash
# Issue 37's benchmark: what transparent proxying and the mesh DNS add, on
# one sidecar pair in two network namespaces made here (needs root):
#   A  the client (the load tools, run as root, so their traffic is captured)
#      and its sidecar;
#   B  the backend app (`http-load serve`, HTTP/1.1 keep-alive, 1 KiB body,
#      on 0.0.0.0:8080) and its sidecar.
# A and B are joined by a veth pair (their Dataplane addresses); each has a
# veth to the root namespace, where meshlink-cp and the upstream DNS
# resolver (dnsmasq, one local record) listen on A's outer address. Both
# namespaces get `meshlink install transparent-proxy --redirect-dns`; the
# sidecars run as uid 5678, which the rules exclude. The backend's service
# is on `kuma.io/protocol: http` (PROTOCOL) and both Dataplanes have
# `transparentProxying: {}`; A's also has an explicit outbound.
#
# HTTP, two variants on the same pair (the same B inbound, the same
# listeners' routes and mTLS; only how the client reaches sidecar A
# differs), interleaved in every round:
#   explicit  client -> 127.0.0.1:<outbound port> (A's explicit outbound)
#   captured  client -> http://<backend VIP>:80/ (the Mesh status' VIP),
#             redirected by the rules to A's capture port 15001 and handed
#             to the VIP's listener by its original destination
# Figures per round and variant, the load tools in A:
#   - wrk -t2 -c16 requests/s, and sidecar A's and B's CPU per request over
#     that run (utime+stime from /proc/PID/stat; B is the control: the same
#     for both variants);
#   - latency p50/p99 at a fixed RATE over 10 keep-alive connections
#     (`http-load latency`: open loop), and A's CPU per request over it;
#   - new connections per second, one request each (`http-load connect`,
#     4 workers): the capture's per-connection cost (conntrack, NAT,
#     SO_ORIGINAL_DST, the listener lookup), which keep-alive hides.
# DNS, three variants, dnsperf in A aimed at the upstream's address, port 53:
#   mesh            `backend.mesh` and `client.mesh` (A records), redirected
#                   to the sidecar's DNS (127.0.0.1:15053), answered there;
#   forwarded       `external.bench` (A), redirected to the sidecar, which
#                   forwards it to the upstream of its --dns-resolv-conf;
#   upstream        `external.bench` straight to the upstream: dnsperf run
#                   as uid 5678, which the rules do not redirect (the path
#                   the sidecar's forwarded query takes).
# Per round and variant: queries/s with dnsperf unthrottled for DNS_DURATION
# seconds (-c 1, up to 100 queries outstanding) and, for the sidecar
# variants, A's CPU per query over it; and the latency p50/p99 at a fixed
# DNS_RATE queries/s (dnsperf -Q, each query's latency from its -v lines:
# real percentiles, not dnsperf's average).
# Each DNS run also records the share of its queries sidecar A counted
# (dns_queries_total): 100 % for mesh and forwarded, 0 % for upstream, a
# check that it went where it should (see forget_dns).
# Odd rounds run the variants in the order above, even rounds in reverse.
# Prints the medians over ROUNDS with each figure's spread (min-max) in
# markdown tables with the ratios captured/explicit and forwarded/upstream,
# and the load average at start and end. No figure is checked against a
# threshold.
#
# CALLGRIND=1 instead runs sidecar A under valgrind --tool=callgrind and
# prints its instructions per request (h2load --h1 -c 4, REQUESTS requests,
# after a warm-up) for both HTTP variants and per query (dnsperf at 200
# queries/s for 5 s) for the two sidecar DNS variants. Kernel work (the NAT,
# conntrack) is not counted.
#
#   sudo bench/transparent-pair.sh
#
# Environment: ROUNDS (3), WRK_DURATION (10s), LAT_DURATION (10s; whole
# seconds, for the CPU figure over the run with its 2 s warm-up), RATE
# (1000), CONN_DURATION (5s), DNS_DURATION (10, seconds), DNS_RATE (1000),
# PROTOCOL (http; tcp also works), NET (10.239: the addresses are
# NET.0.0/29 and NET.1.0/30), PORT_BASE (28900; the API and xDS ports),
# CALLGRIND (0), REQUESTS (2000, CALLGRIND=1), TP_PAIR_KEEP=1 (keep the
# work dir).
# Needs root, iptables, wrk, jq, dnsperf and dnsmasq (dnsmasq-base), and
# valgrind and h2load for CALLGRIND=1; installs the missing ones with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
WRK_DURATION="${WRK_DURATION:-10s}"
LAT_DURATION="${LAT_DURATION:-10s}"
RATE="${RATE:-1000}"
CONN_DURATION="${CONN_DURATION:-5s}"
DNS_DURATION="${DNS_DURATION:-10}"
DNS_RATE="${DNS_RATE:-1000}"
PROTOCOL="${PROTOCOL:-http}"
NET="${NET:-10.239}"
PORT_BASE="${PORT_BASE:-28900}"
CALLGRIND="${CALLGRIND:-0}"
REQUESTS="${REQUESTS:-2000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"

[[ $(id -u) == 0 ]] || {
    echo "needs root (network namespaces, iptables)" >&2
    exit 1
}
# shellcheck source=bench/lib/http-setup.sh
source bench/lib/http-setup.sh
tools=(wrk jq dnsperf dnsmasq iptables setpriv curl conntrack)
[[ $CALLGRIND == 1 ]] && tools+=(valgrind h2load)
install_missing "${tools[@]}"
build_release
# shellcheck source=bench/lib/cp.sh
source bench/lib/cp.sh
# shellcheck source=bench/lib/proc.sh
source bench/lib/proc.sh

WORK="$(mktemp -d /tmp/transparent-pair.XXXXXX)"
chmod 755 "$WORK" # the sidecars (uid 5678) read their files here
PIDS=()
KEEP_WORK="${TP_PAIR_KEEP:-0}"
PROXY_UID=5678
NS_A="mltpa$$" NS_B="mltpb$$"
# Addresses: A's and B's links to the root namespace (outer .1/.5, inner
# .2/.6), and the A-B link (A .1, B .2: the Dataplane addresses).
ROOT_A="$NET.0.1" IN_A="$NET.0.2" ROOT_B="$NET.0.5" IN_B="$NET.0.6"
ADDR_A="$NET.1.1" ADDR_B="$NET.1.2"
APP_PORT=8080
CLIENT_IN=8081  # A's inbound (an idle app of its own, for the sidecar's app check)
EXPLICIT=10001  # A's explicit outbound to the backend, on 127.0.0.1
ADMIN=127.0.0.1:9901 # each sidecar's admin, inside its namespace
API_PORT=$PORT_BASE
XDS_PORT=$((PORT_BASE + 1))
UPSTREAM="$ROOT_A" # the upstream DNS resolver, port 53

delete_netns() {
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
}
trap 'cleanup_work; delete_netns' EXIT
trap 'exit 130' INT TERM

in_a() { ip netns exec "$NS_A" "$@"; }
in_b() { ip netns exec "$NS_B" "$@"; }
cpu_ms() { echo $(($(cpu_ticks "$1") * 1000 / $(getconf CLK_TCK))); }

echo "# meshlink transparent proxying benchmark: $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), rounds $ROUNDS, protocol $PROTOCOL"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# === namespaces and links ===
ip netns add "$NS_A"
ip netns add "$NS_B"
link() { # link NS OUTER_DEV INNER_DEV OUTER_ADDR INNER_ADDR: a veth from the root namespace
    ip link add "$2" type veth peer name "$3"
    ip link set "$3" netns "$1"
    ip addr add "$4/30" dev "$2"
    ip link set "$2" up
    ip netns exec "$1" ip addr add "$5/30" dev "$3"
    ip netns exec "$1" ip link set "$3" up
}
in_a ip link set lo up
in_b ip link set lo up
link "$NS_A" "tpa$$o" "tpa$$i" "$ROOT_A" "$IN_A"
link "$NS_B" "tpb$$o" "tpb$$i" "$ROOT_B" "$IN_B"
ip link add "tpab$$a" type veth peer name "tpab$$b"
ip link set "tpab$$a" netns "$NS_A"
ip link set "tpab$$b" netns "$NS_B"
in_a ip addr add "$ADDR_A/30" dev "tpab$$a"
in_a ip link set "tpab$$a" up
in_b ip addr add "$ADDR_B/30" dev "tpab$$b"
in_b ip link set "tpab$$b" up
# The VIPs must be routable for a connect to reach the rules.
in_a ip route add default via "$ADDR_B"
# B reaches the control plane (on A's outer address) through its own link.
in_b ip route add "$ROOT_A/32" via "$ROOT_B"

# === control plane, upstream resolver ===
CP_HOST="$ROOT_A" CP_ARGS="--advertised-host $ROOT_A" start_cp "$WORK/cp-data" "$WORK/CP.log"
PIDS+=("$CP_PID")
start DNSMASQ dnsmasq -k --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces \
    --listen-address="$UPSTREAM" --port=53 --pid-file= --host-record=external.bench,198.51.100.55
printf 'nameserver %s\n' "$UPSTREAM" >"$WORK/resolv.conf"
wait_for "dnsmasq on $UPSTREAM:53" 10 bash -c \
    "dnsperf -s $UPSTREAM -d <(echo 'external.bench A') -n 1 | grep -q 'NOERROR 1 '"

inbound_tags="{kuma.io/service: backend, kuma.io/protocol: $PROTOCOL}"
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
    address: $ADDR_A
    inbound: [{port: $CLIENT_IN, tags: {kuma.io/service: client}}]
    outbound: [{port: $EXPLICIT, tags: {kuma.io/service: backend}}]
    transparentProxying: {}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: backend-1, mesh: bench}
spec:
  networking:
    address: $ADDR_B
    inbound: [{port: $APP_PORT, tags: $inbound_tags}]
    transparentProxying: {}
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: client-to-backend, mesh: bench}
spec:
  targetRef: {kind: MeshService, name: backend}
  from: [{targetRef: {kind: MeshService, name: client}, default: {action: Allow}}]
EOF
cli=("$BIN/meshlink" --server "http://$ROOT_A:$API_PORT" --token "$(cat "$WORK/cp-data/admin-token")")
"${cli[@]}" apply -f "$WORK/mesh.yaml" >"$WORK/apply.log"

# === rules, app, sidecars ===
# Under callgrind, sidecar A runs as root with group 5678 (vgdb, which
# callgrind_control uses, did not reach a valgrind running as another uid),
# so A's rules also exclude that gid.
a_extra=()
[[ $CALLGRIND == 1 ]] && a_extra=(--kuma-dp-gid "$PROXY_UID")
in_a "$BIN/meshlink" install transparent-proxy --redirect-dns --ip-family-mode ipv4 "${a_extra[@]}" >>"$WORK/install.log"
in_b "$BIN/meshlink" install transparent-proxy --redirect-dns --ip-family-mode ipv4 >>"$WORK/install.log"
start APP ip netns exec "$NS_B" "$BIN/http-load" serve --addr "0.0.0.0:$APP_PORT" --body-bytes 1024
start CLIENT_APP ip netns exec "$NS_A" "$BIN/http-load" serve --addr "0.0.0.0:$CLIENT_IN"
mkdir -p "$WORK/sidecar" "$WORK/cg"
cp "$WORK/cp-data/cp-tls/ca.pem" "$WORK/sidecar/cp-ca.pem"
for name in client-1 backend-1; do
    "${cli[@]}" token dataplane --mesh bench --name "$name" >"$WORK/sidecar/$name.token"
done
chown -R "$PROXY_UID:$PROXY_UID" "$WORK/sidecar" "$WORK/cg"
# sidecar NS NAME VAR [WRAP...]: starts a sidecar in NS as uid 5678 (ip
# netns exec and setpriv exec: ML_<VAR>_PID is the proxy's, or valgrind's).
# SIDECAR_UID (5678) is the uid it runs as.
sidecar() {
    local ns="$1" name="$2" var="$3"
    shift 3
    RUST_LOG="${RUST_LOG:-warn}" start "ML_$var" ip netns exec "$ns" \
        setpriv "--reuid=${SIDECAR_UID:-$PROXY_UID}" --regid=$PROXY_UID --clear-groups "$@" \
        "$BIN/meshlink-proxy" run --mode sidecar --cp "https://$ROOT_A:$XDS_PORT" --cp-ca "$WORK/sidecar/cp-ca.pem" \
        --mesh bench --name "$name" --token-file "$WORK/sidecar/$name.token" --admin-addr "$ADMIN" \
        --dns-resolv-conf "$WORK/resolv.conf"
}
WAIT_SECS=60
if [[ $CALLGRIND == 1 ]]; then
    WAIT_SECS=300
    SIDECAR_UID=0 sidecar "$NS_A" client-1 A valgrind --tool=callgrind "--callgrind-out-file=$WORK/cg/callgrind.%p.out"
else
    sidecar "$NS_A" client-1 A
fi
sidecar "$NS_B" backend-1 B
wait_for "sidecar A /ready" "$WAIT_SECS" in_a curl -fs "http://$ADMIN/ready"
wait_for "sidecar B /ready" "$WAIT_SECS" in_b curl -fs "http://$ADMIN/ready"

# The backend's VIP, from the Mesh status.
vip() {
    curl -fs -H "Authorization: Bearer $(cat "$WORK/cp-data/admin-token")" \
        "http://$ROOT_A:$API_PORT/api/v1/meshes/bench" | jq -er '.status.vips.backend'
}
wait_for "the backend's VIP in the Mesh status" "$WAIT_SECS" vip
VIP=$(vip)
echo "# backend VIP $VIP; A $ADDR_A, B $ADDR_B; CP and upstream DNS $ROOT_A"
wait_for "a request through the explicit outbound" "$WAIT_SECS" in_a curl -fs "http://127.0.0.1:$EXPLICIT/"
wait_for "a request to the VIP, captured" "$WAIT_SECS" in_a curl -fs "http://$VIP:80/"
wait_for "backend.mesh through the sidecar's DNS" "$WAIT_SECS" bash -c \
    "ip netns exec $NS_A dnsperf -s $UPSTREAM -d <(echo 'backend.mesh A') -n 1 | grep -q 'NOERROR 1 '"
# The VIP is no interface's address: an answer from it came through the
# capture. The rules as installed, for the record:
in_a iptables -t nat -S >"$WORK/rules-a.txt"
printf 'backend.mesh A\nclient.mesh A\n' >"$WORK/mesh-names.txt"
printf 'external.bench A\n' >"$WORK/external.txt"
chmod 644 "$WORK"/*.txt

target_of() {
    case "$1" in
    explicit) echo "127.0.0.1:$EXPLICIT" ;;
    captured) echo "$VIP:80" ;;
    esac
}
# dns_run VARIANT DNSPERF_ARGS...: dnsperf in A for the variant.
dns_run() {
    local v="$1"
    shift
    case "$v" in
    mesh) in_a dnsperf -s "$UPSTREAM" -d "$WORK/mesh-names.txt" "$@" ;;
    forwarded) in_a dnsperf -s "$UPSTREAM" -d "$WORK/external.txt" "$@" ;;
    upstream) in_a setpriv --reuid=$PROXY_UID --regid=$PROXY_UID --clear-groups \
        dnsperf -s "$UPSTREAM" -d "$WORK/external.txt" "$@" ;;
    esac
}
# percentiles FILE: p50 and p99 (µs) of dnsperf -v's per-query latencies.
percentiles() {
    awk '/^> NOERROR/ {print $NF * 1e6}' "$1" | sort -g |
        awk '{a[NR] = $1} END {if (NR == 0) {print "- -"; exit} i50 = int(NR * 0.50 + 0.5); i99 = int(NR * 0.99 + 0.5); if (i50 < 1) i50 = 1; if (i99 < 1) i99 = 1; printf "%.0f %.0f\n", a[i50], a[i99]}'
}
dns_lost() { awk '/Queries lost:/ {print $3}' "$1"; }
# forget_dns: deletes A's conntrack entries of UDP to port 53 before a DNS
# run. The sidecar forwards each query from a fresh socket (a random source
# port), not redirected (uid 5678), so after an unthrottled forwarded run
# nearly every ephemeral port has an un-NATed entry to the upstream's port
# 53 for 30 s; a new dnsperf socket on such a port matches it and goes
# straight to the upstream, past the sidecar (seen in the first runs: 0 %
# via the sidecar). Kuma's rules split DNS conntrack zones for this; ours
# do not (yet). via_sidecar_pct checks every run.
forget_dns() { in_a conntrack -D -p udp --dport 53 >/dev/null 2>&1 || true; }
dns_done() { awk '/Queries completed:/ {print $3}' "$1"; }
# dns_seen: the queries sidecar A's DNS has answered or forwarded so far
# (every result of its dns_queries_total), to check where a run's went.
dns_seen() { in_a curl -fs "http://$ADMIN/metrics" | awk '$1 ~ /dns_queries_total/ {n += $2} END {printf "%d\n", n}'; }
# via_sidecar SEEN_BEFORE FILE: the share of FILE's completed queries that
# the sidecar saw, in % (100 for mesh and forwarded, 0 for upstream).
via_sidecar() { awk -v a="$1" -v b="$(dns_seen)" -v n="$(dns_done "$2")" 'BEGIN {printf "%.0f", (b - a) * 100 / n}'; }

RESULTS="$WORK/results.tsv" # variant, figure, value
HTTP_VARIANTS=(explicit captured)
DNS_VARIANTS=(mesh forwarded upstream)
# B's configuration does not depend on the variant; A's CPU and B's CPU
# per request are both recorded (B as a control).
if [[ $CALLGRIND == 1 ]]; then
    cg_control() { timeout 120 callgrind_control "$1" "$ML_A_PID" >/dev/null; }
    instructions() {
        local latest
        # shellcheck disable=SC2012 # our own file names
        latest=$(ls -t "$WORK"/cg/callgrind."$1".out* | head -1)
        awk '/^(summary|totals):/ {print $2; exit}' "$latest"
    }
    for v in "${HTTP_VARIANTS[@]}"; do
        echo "callgrind: $v" >&2
        target=$(target_of "$v")
        in_a h2load --h1 -c 4 -n 200 "http://$target/" >/dev/null
        cg_control -z
        in_a h2load --h1 -c 4 -n "$REQUESTS" "http://$target/" >"$WORK/h2load-$v.txt"
        grep -q "$REQUESTS succeeded, 0 failed, 0 errored" "$WORK/h2load-$v.txt" ||
            echo "# $v: $(grep -E '^requests:' "$WORK/h2load-$v.txt")"
        cg_control -d
        printf '%s\tir_per_req\t%s\n' "$v" "$(($(instructions "$ML_A_PID") / REQUESTS))" >>"$RESULTS"
    done
    for v in mesh forwarded; do
        echo "callgrind: dns $v" >&2
        dns_run "$v" -n 20 >/dev/null
        cg_control -z
        dns_run "$v" -Q 200 -l 5 >"$WORK/dns-cg-$v.txt"
        cg_control -d
        done_q=$(awk '/Queries completed:/ {print $3}' "$WORK/dns-cg-$v.txt")
        printf '%s\tir_per_query\t%s\n' "$v" "$(($(instructions "$ML_A_PID") / done_q))" >>"$RESULTS"
    done
    echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    ir() { awk -F'\t' -v v="$1" -v f="$2" '$1 == v && $2 == f {print $3}' "$RESULTS"; }
    e=$(ir explicit ir_per_req) c=$(ir captured ir_per_req)
    echo "| sidecar A, instructions (Ir) | explicit | captured | captured / explicit |"
    echo "|---|---|---|---|"
    echo "| per request, h2load --h1 -c 4, $REQUESTS requests | $e | $c | $(awk -v a="$c" -v b="$e" 'BEGIN {printf "%.3f", a / b}') |"
    echo
    echo "| sidecar A, instructions (Ir) per query | mesh name | forwarded |"
    echo "|---|---|---|"
    echo "| dnsperf -Q 200, 5 s | $(ir mesh ir_per_query) | $(ir forwarded ir_per_query) |"
    exit 0
fi

# Odd rounds run the variants in order, even rounds in reverse (no variant
# always runs first after the other's load).
reversed() { printf '%s\n' "$@" | tac; }
for r in $(seq 1 "$ROUNDS"); do
    order=("${HTTP_VARIANTS[@]}") dns_order=("${DNS_VARIANTS[@]}")
    if ((r % 2 == 0)); then
        mapfile -t order < <(reversed "${HTTP_VARIANTS[@]}")
        mapfile -t dns_order < <(reversed "${DNS_VARIANTS[@]}")
    fi
    for v in "${order[@]}"; do
        target=$(target_of "$v")
        echo "round $r/$ROUNDS: $v" >&2
        a0=$(cpu_ms "$ML_A_PID") b0=$(cpu_ms "$ML_B_PID")
        in_a wrk -t2 -c16 -d "$WRK_DURATION" "http://$target/" >"$WORK/wrk.txt"
        a1=$(cpu_ms "$ML_A_PID") b1=$(cpu_ms "$ML_B_PID")
        rps=$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk.txt")
        reqs=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
        errors=$(awk '/Non-2xx|Socket errors/ {print}' "$WORK/wrk.txt")
        [[ -n "$errors" ]] && echo "# $v round $r wrk: $errors"
        printf '%s\twrk_rps\t%s\n%s\tcpu_a_us_per_req\t%s\n%s\tcpu_b_us_per_req\t%s\n' "$v" "$rps" \
            "$v" "$(((a1 - a0) * 1000 / reqs))" "$v" "$(((b1 - b0) * 1000 / reqs))" >>"$RESULTS"
        a0=$(cpu_ms "$ML_A_PID")
        in_a "$BIN/http-load" latency --target "$target" --rate "$RATE" --duration "$LAT_DURATION" >"$WORK/lat.json"
        a1=$(cpu_ms "$ML_A_PID")
        # CPU over the warm-up too (2 s): per request of the whole run.
        sent=$(jq '.lat_requests' "$WORK/lat.json")
        [[ $(jq .lat_errors "$WORK/lat.json") != 0 ]] && echo "# $v round $r latency errors: $(jq .lat_errors "$WORK/lat.json")"
        printf '%s\tp50_us\t%s\n%s\tp99_us\t%s\n' "$v" "$(jq .lat_p50_us "$WORK/lat.json")" \
            "$v" "$(jq .lat_p99_us "$WORK/lat.json")" >>"$RESULTS"
        printf '%s\tcpu_a_us_per_req_fixed\t%s\n' "$v" \
            "$(awk -v ms=$((a1 - a0)) -v n="$sent" -v w="${LAT_DURATION%s}" 'BEGIN {printf "%.0f", ms * 1000 / (n * (w + 2) / w)}')" >>"$RESULTS"
        in_a "$BIN/http-load" connect --target "$target" --workers 4 --duration "$CONN_DURATION" >"$WORK/conn.json"
        [[ $(jq .conn_errors "$WORK/conn.json") != 0 ]] && echo "# $v round $r connect errors: $(jq .conn_errors "$WORK/conn.json")"
        printf '%s\tconn_per_s\t%s\n%s\tconn_p50_us\t%s\n' "$v" "$(jq .conn_per_s "$WORK/conn.json")" \
            "$v" "$(jq .conn_p50_us "$WORK/conn.json")" >>"$RESULTS"
    done
    for v in "${dns_order[@]}"; do
        echo "round $r/$ROUNDS: dns $v" >&2
        forget_dns
        a0=$(cpu_ms "$ML_A_PID") seen=$(dns_seen)
        dns_run "$v" -l "$DNS_DURATION" >"$WORK/dns-qps.txt"
        a1=$(cpu_ms "$ML_A_PID")
        done_q=$(dns_done "$WORK/dns-qps.txt")
        printf '%s\tvia_sidecar_pct\t%s\n' "$v" "$(via_sidecar "$seen" "$WORK/dns-qps.txt")" >>"$RESULTS"
        printf '%s\tdns_qps\t%s\n' "$v" "$(awk '/Queries per second:/ {printf "%.0f", $4}' "$WORK/dns-qps.txt")" >>"$RESULTS"
        [[ $(dns_lost "$WORK/dns-qps.txt") != 0 ]] && echo "# dns $v round $r unthrottled: $(dns_lost "$WORK/dns-qps.txt") queries lost"
        if [[ $v != upstream ]]; then
            printf '%s\tcpu_a_us_per_query\t%s\n' "$v" "$(((a1 - a0) * 1000 / done_q))" >>"$RESULTS"
        fi
        lat="$WORK/dns-lat-$v-$r.txt" # kept with TP_PAIR_KEEP=1
        forget_dns
        seen=$(dns_seen)
        dns_run "$v" -l "$DNS_DURATION" -Q "$DNS_RATE" -v >"$lat"
        printf '%s\tvia_sidecar_pct_fixed\t%s\n' "$v" "$(via_sidecar "$seen" "$lat")" >>"$RESULTS"
        [[ $(dns_lost "$lat") != 0 ]] && echo "# dns $v round $r at $DNS_RATE/s: $(dns_lost "$lat") queries lost"
        read -r p50 p99 <<<"$(percentiles "$lat")"
        printf '%s\tdns_p50_us\t%s\n%s\tdns_p99_us\t%s\n' "$v" "$p50" "$v" "$p99" >>"$RESULTS"
    done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
values() { awk -F'\t' -v v="$1" -v f="$2" '$1 == v && $2 == f {print $3}' "$RESULTS"; }
fig() { values "$1" "$2" | median; }
spread() { values "$1" "$2" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) print lo "-" hi; else print "-"}'; }
cell() { local m; m=$(fig "$1" "$2"); [[ $m == - ]] && echo "-" || echo "$m ($(spread "$1" "$2"))"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
diff_of() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%+.1f", a - b }'; }
echo
echo "Medians over $ROUNDS rounds (min-max):"
echo
echo "| figure | explicit | captured | captured / explicit | captured - explicit |"
echo "|---|---|---|---|---|"
for f in wrk_rps cpu_a_us_per_req cpu_b_us_per_req p50_us p99_us cpu_a_us_per_req_fixed conn_per_s conn_p50_us; do
    e=$(fig explicit "$f") c=$(fig captured "$f")
    echo "| $f | $(cell explicit "$f") | $(cell captured "$f") | $(ratio "$c" "$e") | $(diff_of "$c" "$e") |"
done
echo
echo "| figure | mesh | forwarded | upstream | forwarded / upstream | forwarded - upstream |"
echo "|---|---|---|---|---|---|"
for f in dns_qps cpu_a_us_per_query dns_p50_us dns_p99_us via_sidecar_pct via_sidecar_pct_fixed; do
    fw=$(fig forwarded "$f") up=$(fig upstream "$f")
    echo "| $f | $(cell mesh "$f") | $(cell forwarded "$f") | $(cell upstream "$f") | $(ratio "$fw" "$up") | $(diff_of "$fw" "$up") |"
done
echo
echo "# raw figures (variant, figure, value)"
cat "$RESULTS"
