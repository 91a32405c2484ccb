#!/usr/bin/env bash
# The store's size over a simulated day of control-plane writes (3 replicas'
# heartbeats and lease renewals every 5 s, singleton job records every 30 s,
# 100 reconnect storms of 1,000 proxies), with and without change-feed
# compaction, on SQLite and on PostgreSQL. Drives the store API directly
# with simulated time (crates/store/examples/feed_size.rs): about a minute
# per run. Prints one JSON line per simulated hour and a summary per run.
#
#   bench/store-compaction.sh [HOURS]      (default 24)
#
# PROFILE=dev uses a debug build (sizes do not depend on it; default release).
# Needs Debian's postgresql package (a throwaway server is started and stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
HOURS="${1:-24}"
PROFILE="${PROFILE:-release}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"
cargo build -q --profile "$PROFILE" -p meshlink-store --example feed_size
DIR="$PROFILE"; [[ "$PROFILE" == dev ]] && DIR=debug
BIN="$CARGO_TARGET_DIR/$DIR/examples/feed_size"

export MESHLINK_PG_DIR=/tmp/meshlink-bench-compaction-pg MESHLINK_PG_PORT=54410
PG_URL="$(scripts/pg-test-server start)"
WORK="$(mktemp -d)"
cleanup() {
    scripts/pg-test-server stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "# store size over $HOURS simulated hours, $(nproc) cores, $(date -u +%FT%TZ)"
for mode in compact no-compact; do
    flag=(); [[ "$mode" == no-compact ]] && flag=(--no-compact)
    "$BIN" --store "sqlite://$WORK/$mode/store.db" --hours "$HOURS" "${flag[@]}"
    db="bench_${mode//-/_}"
    psql -q "$PG_URL" -c "CREATE DATABASE $db" >/dev/null
    "$BIN" --store "${PG_URL%/*}/$db" --hours "$HOURS" "${flag[@]}"
done
