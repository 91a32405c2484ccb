#!/usr/bin/env bash
# Side-by-side store benchmark: the same control-plane binary on SQLite (the
# embedded default) and on PostgreSQL, in one run. For each: idle RSS, apply
# throughput for N Dataplanes through the REST API, get latency (p50/p99),
# list-all latency, and RSS with N resources.
#
#   bench/store-compare.sh [N]      (default N=10000)
#
# Needs Debian's postgresql package (a throwaway server is started and stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"
cargo build --release -q --bin meshlink-cp --bin api-load
BIN="$CARGO_TARGET_DIR/release"
PORT=56810

PG_URL="$(MESHLINK_PG_DIR=/tmp/meshlink-bench-pg MESHLINK_PG_PORT=54400 scripts/pg-test-server start)"
WORK="$(mktemp -d)"
cleanup() {
    [[ -n "${CP_PID:-}" ]] && kill "$CP_PID" 2>/dev/null || true
    MESHLINK_PG_DIR=/tmp/meshlink-bench-pg scripts/pg-test-server stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

run_one() {
    local name="$1" store="$2"
    local dir="$WORK/$name"
    local args=(run --data-dir "$dir" --api-addr "127.0.0.1:$PORT" --xds-addr 127.0.0.1:0 --grant-addr 127.0.0.1:0)
    [[ -n "$store" ]] && args+=(--store "$store")
    RUST_LOG=warn "$BIN/meshlink-cp" "${args[@]}" &
    CP_PID=$!
    for _ in $(seq 1 200); do
        curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
        sleep 0.05
    done
    local idle; idle=$(rss_kb "$CP_PID")
    local result; result=$("$BIN/api-load" --server "http://127.0.0.1:$PORT" --token "$(cat "$dir/admin-token")" --count "$N")
    local loaded; loaded=$(rss_kb "$CP_PID")
    kill "$CP_PID"; wait "$CP_PID" || true; CP_PID=
    echo "{\"store\": \"$name\", \"idle_rss_kb\": $idle, \"loaded_rss_kb\": $loaded, \"load\": $result}"
}

echo "# meshlink store benchmark: N=$N, $(nproc) cores, $(date -u +%FT%TZ)"
run_one sqlite ""
psql -q "$PG_URL" -c "CREATE DATABASE bench_store" >/dev/null
run_one postgres "${PG_URL%/*}/bench_store"
