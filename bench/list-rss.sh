#!/usr/bin/env bash
# Peak RSS of meshlink-cp while `meshlink get` lists N Dataplanes (issue 9:
# "list of 10,000 resources, peak RSS <= 2x idle").
#
#   bench/list-rss.sh [N]      (default N=10000)
#
# Starts a release meshlink-cp on a fresh data dir (SQLite store), applies a
# Mesh and N Dataplanes through the REST API (`xds-load --phase setup`),
# restarts the control plane (its idle RSS after the restart is the
# baseline, as in docs/BENCHMARKS.md), then lists the Dataplanes with the
# real CLI in every output format, once with the default chunk size (500)
# and once with --chunk-size 0 (one request: the streamed whole list), and
# once with curl (the raw whole list). Before each list the kernel's
# peak-RSS mark (VmHWM) is reset, so each row's peak is that list's own.
# The CLI's own peak RSS comes from /usr/bin/time. Outputs of the two chunk
# sizes are compared byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"
# PROFILE=debug measures the debug binaries instead (quicker to build; not
# the figures to quote).
PROFILE="${PROFILE:-release}"
# BIN_DIR=DIR uses the binaries in DIR as they are (no build), e.g. to
# measure an older meshlink-cp against the same tools.
if [[ -n "${BIN_DIR:-}" ]]; then
    :
elif [[ "$PROFILE" == release ]]; then
    cargo build --release -q -p meshlink-cp -p meshlink -p meshlink-bench \
        --bin meshlink-cp --bin meshlink --bin xds-load
else
    cargo build -q -p meshlink-cp -p meshlink -p meshlink-bench \
        --bin meshlink-cp --bin meshlink --bin xds-load
fi
BIN="${BIN_DIR:-$CARGO_TARGET_DIR/$PROFILE}"
API_PORT=56830
XDS_PORT=56831
# shellcheck source=bench/lib/cp.sh
source bench/lib/cp.sh

WORK="$(mktemp -d)"
cleanup() {
    [[ -n "${CP_PID:-}" ]] && kill "$CP_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

DIR="$WORK/cp"
LOG="$WORK/cp.log"
SERVER="http://127.0.0.1:$API_PORT"
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

echo "# meshlink list RSS benchmark: N=$N, $(nproc) cores, $(date -u +%FT%TZ), $PROFILE build, SQLite store, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_cp "$DIR" "$LOG"
"$BIN/xds-load" --api "$SERVER" --admin-token-file "$DIR/admin-token" \
    --xds "https://127.0.0.1:$XDS_PORT" --ca "$DIR/cp-tls/ca.pem" -n "$N" --phase setup >/dev/null
stop_cp
start_cp "$DIR" "$LOG"
TOKEN="$(cat "$DIR/admin-token")"
sleep 5 # let start-up work (status load, CA controller) finish before the baseline
IDLE=$(rss_kb "$CP_PID")
echo "cp idle RSS after a restart with $N Dataplanes stored: $(mib "$IDLE") MiB (peak during start-up $(mib "$(peak_rss_kb "$CP_PID")") MiB)"
echo
echo "| list | cp peak RSS | peak / idle | cp RSS after | cp CPU | wall | CLI peak RSS | output |"
echo "|---|---|---|---|---|---|---|---|"

# measure LABEL OUTFILE COMMAND...: one list, with the cp's and the client's peaks.
measure() {
    local label="$1" out="$2"; shift 2
    reset_peak_rss "$CP_PID"
    local cpu0 t0 t1 client_kb
    cpu0=$(cpu_ticks "$CP_PID")
    t0=$(date +%s.%N)
    /usr/bin/time -f %M -o "$WORK/time" "$@" >"$out"
    t1=$(date +%s.%N)
    client_kb=$(cat "$WORK/time")
    local peak after cpu
    peak=$(peak_rss_kb "$CP_PID")
    after=$(rss_kb "$CP_PID")
    cpu=$(( $(cpu_ticks "$CP_PID") - cpu0 ))
    echo "| $label | $(mib "$peak") MiB | $(awk -v p="$peak" -v i="$IDLE" 'BEGIN {printf "%.2f", p / i}') | $(mib "$after") MiB | $((cpu * 10)) ms | $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", b - a}') | $(mib "$client_kb") MiB | $(( $(wc -c <"$out") / 1024 )) KiB |"
}

for output in table yaml json; do
    for chunk in 500 0; do
        measure "\`get dataplanes -o $output --chunk-size $chunk\`" "$WORK/$output-$chunk" \
            "$BIN/meshlink" --server "$SERVER" --token "$TOKEN" get dataplanes -o "$output" --chunk-size "$chunk"
    done
    if ! cmp -s "$WORK/$output-500" "$WORK/$output-0"; then
        echo "-o $output: the paged and the one-request outputs differ" >&2
        exit 1
    fi
done
measure "\`curl /api/v1/dataplanes\` (whole list)" "$WORK/curl" \
    curl -fsS -H "Authorization: Bearer $TOKEN" "$SERVER/api/v1/dataplanes"
measure "\`curl /api/v1/dataplanes?limit=1000\` (one page)" "$WORK/curl-page" \
    curl -fsS -H "Authorization: Bearer $TOKEN" "$SERVER/api/v1/dataplanes?limit=1000"
# xds-load's setup also applies its backend Dataplanes: compare with the
# whole list's item count, and check that it holds the N proxies.
rows=$(($(wc -l <"$WORK/table-0") - 1))
items=$(jq '.items | length' "$WORK/curl")
[[ "$rows" -eq "$items" && "$items" -ge "$N" ]] || {
    echo "the table has $rows rows and the list $items items, expected $N or more of each" >&2
    exit 1
}
echo
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
if grep -qiE "panic|ERROR" "$LOG"; then
    echo "meshlink-cp logged errors:" >&2
    grep -iE "panic|ERROR" "$LOG" | sort | uniq -c | sort -rn | head -n 20 >&2
fi
