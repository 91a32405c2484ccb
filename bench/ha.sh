#!/usr/bin/env bash
# Control-plane replicas on one PostgreSQL (issue 11), in one run:
#
#   bench/ha.sh [N] [KILLS] [SIDECARS]   (defaults 10000, 20, 10)
#
# 1. Propagation with N simulated Envoy proxies (xds-load, delta ADS): once
#    on one replica, then spread over three replicas (the change is applied
#    on replica 1; the proxies on replicas 2 and 3 get it through the change
#    feed). Same database server, fresh database each, same flags.
# 2. Change-feed delay between two replicas: `feed-delay` writes 500 Meshes
#    on replica 1's API and long-polls replica 2's watch; the delay is from
#    the writer's acknowledgement to the watcher receiving the write.
# 3. Failover time over KILLS kills: SIDECARS real meshlink-proxy sidecars
#    given both replicas' URLs, all on the replica that is then killed with
#    SIGKILL; the time until every sidecar reports its xDS stream healthy on
#    the other replica (meshlink_proxy_cp_connected{url} 1, polled). The
#    killed replica is restarted and becomes the next one killed.
#
# Runs its own PostgreSQL server (scripts/pg-test-server in a private
# directory). Prints the load average with every figure.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
KILLS="${2:-20}"
SIDECARS="${3:-10}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-release}"
cargo build --release -q -p meshlink-cp -p meshlink -p meshlink-proxy -p meshlink-bench \
    --bin meshlink-cp --bin meshlink --bin meshlink-proxy --bin xds-load --bin feed-delay
BIN="$CARGO_TARGET_DIR/release"
WORK="$(mktemp -d)"
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    MESHLINK_PG_DIR="$WORK/pg" scripts/pg-test-server stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
PG_URL="$(MESHLINK_PG_DIR="$WORK/pg" MESHLINK_PG_PORT=55700 scripts/pg-test-server start)"
PG_BASE="${PG_URL%/*}"
newdb() { psql -q "$PG_URL" -c "CREATE DATABASE $1" >/dev/null; echo "$PG_BASE/$1"; }

# start_replica I STORE LEASE: replica I on API 5690I / xDS 5691I.
declare -A RPID
start_replica() {
    local i="$1" store="$2"
    RUST_LOG="${RUST_LOG:-warn}" "$BIN/meshlink-cp" run --data-dir "$WORK/cp-$i" --store "$store" \
        --instance "cp-$i" --api-addr "127.0.0.1:5690$i" --xds-addr "127.0.0.1:5691$i" \
        --grant-addr 127.0.0.1:0 --advertised-host 127.0.0.1 --leader-lease "${LEASE:-15s}" \
        ${CP_ARGS:-} >>"$WORK/cp-$i.log" 2>&1 &
    RPID[$i]=$!
    PIDS+=("$!")
    for _ in $(seq 1 400); do
        curl -fs "http://127.0.0.1:5690$i/readyz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "replica $i did not become ready:" >&2
    cat "$WORK/cp-$i.log" >&2
    exit 1
}
stop_all() {
    for i in "${!RPID[@]}"; do kill "${RPID[$i]}" 2>/dev/null || true; done
    for i in "${!RPID[@]}"; do wait "${RPID[$i]}" 2>/dev/null || true; done
    RPID=()
    rm -rf "$WORK"/cp-*
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "# meshlink replicas benchmark: N=$N, $(nproc) cores, $(date -u +%FT%TZ), release build, PostgreSQL $(psql -tA "$PG_URL" -c 'SHOW server_version'), load average $(load)"

# 1. Propagation: one replica, then three.
for replicas in 1 3; do
    store="$(newdb "prop$replicas")"
    urls=()
    for i in $(seq 1 "$replicas"); do
        start_replica "$i" "$store"
        urls+=("https://127.0.0.1:5691$i")
    done
    xds="$(IFS=,; echo "${urls[*]}")"
    t0=(); for i in $(seq 1 "$replicas"); do t0+=("$(cpu_ticks "${RPID[$i]}")"); done
    echo "## propagation, $replicas replica(s), N=$N, load average $(load)"
    "$BIN/xds-load" --api http://127.0.0.1:56901 --admin-token-file "$WORK/cp-1/admin-token" \
        --xds "$xds" --ca "$WORK/cp-1/cp-tls/ca.pem" -n "$N" --storm resume \
        --connections "$(( (N + 99) / 100 > replicas ? (N + 99) / 100 : replicas ))" | tee "$WORK/prop$replicas.out"
    for i in $(seq 1 "$replicas"); do
        echo "replica $i CPU during the run: $(( $(cpu_ticks "${RPID[$i]}") - ${t0[$((i - 1))]} )) centiseconds"
    done
    stop_all
done

# 2. Change-feed delay between two replicas.
store="$(newdb feed)"
start_replica 1 "$store"
start_replica 2 "$store"
echo "## change-feed delay, replica 1 -> replica 2, load average $(load)"
"$BIN/feed-delay" --writer http://127.0.0.1:56901 --watcher http://127.0.0.1:56902 \
    --token "$(cat "$WORK/cp-1/admin-token")" --count 500
stop_all

# 3. Failover time over KILLS kills.
store="$(newdb failover)"
LEASE=5s start_replica 1 "$store"
TOKEN="$(cat "$WORK/cp-1/admin-token")"
ml() { "$BIN/meshlink" --server http://127.0.0.1:56901 --token "$TOKEN" "$@"; }
{
    printf 'type: Mesh\nname: default\nmtls:\n  enabledBackend: ca-1\n  backends:\n    - name: ca-1\n      type: builtin\n'
    for s in $(seq 1 "$SIDECARS"); do
        printf -- '---\ntype: Dataplane\nmesh: default\nname: fo-%s\nnetworking:\n  address: 127.0.0.1\n  inbound:\n    - port: %s\n      servicePort: %s\n      tags: {kuma.io/service: fo}\n' \
            "$s" "$((57000 + s))" "$((57500 + s))"
    done
} | ml apply -f - >/dev/null
declare -a ADMIN
for s in $(seq 1 "$SIDECARS"); do
    ml token dataplane --mesh default --name "fo-$s" --valid-for 24h >"$WORK/fo-$s.token" 2>/dev/null
    "$BIN/meshlink-proxy" run --cp "https://127.0.0.1:56911,https://127.0.0.1:56912" \
        --cp-ca "$WORK/cp-1/cp-tls/ca.pem" --token-file "$WORK/fo-$s.token" --mesh default --name "fo-$s" \
        --admin-addr "127.0.0.1:$((57800 + s))" >"$WORK/fo-$s.log" 2>&1 &
    PIDS+=("$!")
    ADMIN[s]=$((57800 + s))
done
LEASE=5s start_replica 2 "$store"
# connected_on URL: how many sidecars report a healthy xDS stream to URL.
connected_on() {
    local n=0 s
    for s in $(seq 1 "$SIDECARS"); do
        if curl -fs "http://127.0.0.1:${ADMIN[s]}/metrics" 2>/dev/null |
            grep -q "^meshlink_proxy_cp_connected{url=\"$1\"} 1"; then
            n=$((n + 1))
        fi
    done
    echo "$n"
}
wait_all_on() {
    local deadline=$((SECONDS + 60))
    while [[ "$(connected_on "$1")" != "$SIDECARS" ]]; do
        ((SECONDS < deadline)) || { echo "sidecars not all on $1 after 60 s" >&2; exit 1; }
        sleep 0.02
    done
}
wait_all_on https://127.0.0.1:56911
victim=1
times=()
echo "## failover: $SIDECARS sidecars, $KILLS kills, lease 5s, load average $(load)"
for k in $(seq 1 "$KILLS"); do
    other=$((3 - victim))
    start_ns=$(date +%s%N)
    kill -9 "${RPID[$victim]}"
    wait "${RPID[$victim]}" 2>/dev/null || true
    wait_all_on "https://127.0.0.1:5691$other"
    ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
    times+=("$ms")
    echo "kill $k (cp-$victim): every sidecar on cp-$other after $ms ms"
    LEASE=5s start_replica "$victim" "$store"
    victim=$other
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "failover over %d kills: median %d ms, max %d ms\n", NR, a[int((NR+1)/2)], a[NR]}'
echo "load average at the end: $(load)"
