#!/usr/bin/env bash
# xDS control-plane benchmark. For each run: starts a release meshlink-cp on
# a fresh data dir (SQLite store); `xds-load --phase setup` applies a mTLS
# Mesh and N Dataplanes through the REST API; then, on the same control
# plane, `xds-load --phase xds` simulates N Envoys on delta ADS and
# measures propagation of an endpoint change, control-plane RSS per connected
# proxy (VmRSS from /proc before the proxies connect and after), and reconnect
# storms (resume and fresh) with a stale-certificate count.
#
#   bench/xds-load.sh [N[:C] ...]     (default: 1000 10000 1000:1000 10000:10000)
#
# C is the number of HTTP/2 connections the N streams share (default N/100;
# N:N means one connection per proxy, as real proxies have). Each run prints
# a table and a JSON line; all JSON lines are repeated at the end (and
# copied to $XDS_LOAD_OUT if set).
#
# The control plane is no longer restarted after the bulk apply (the hub
# now patches its view from the change feed); "cp CPU in the 10 s after
# setup" shows that it is idle again.
# RUST_LOG (default warn) sets the cp's log level; its log is checked for
# errors after each run. RSS_SETTLE_SECS (default 60; 0 skips it): once
# every proxy first holds its config and after each storm, with every proxy
# still connected, the cp's RSS is read again that long after all were
# current ("cp RSS ... after --rss-settle"), and once more that long after
# the run (no proxy connected). XDS_LOAD_ARGS adds
# arguments to the measured phase (e.g. "--rounds 15" for a steadier
# median of the per-change CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=("$@")
[[ ${#RUNS[@]} -eq 0 ]] && RUNS=(1000 10000 1000:1000 10000:10000)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"
# BIN_DIR=DIR uses the binaries in DIR as they are (no build).
if [[ -z "${BIN_DIR:-}" ]]; then
    cargo build --release -q -p meshlink-cp -p meshlink-bench --bin meshlink-cp --bin xds-load
fi
BIN="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
# Override the ports to run beside another copy of this script.
API_PORT="${API_PORT:-56820}"
XDS_PORT="${XDS_PORT:-56821}"

WORK="$(mktemp -d)"
cleanup() {
    [[ -n "${CP_PID:-}" ]] && kill "$CP_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=bench/lib/cp.sh
source bench/lib/cp.sh
# Connections the kernel dropped because a listen queue was full (whole
# machine; SYNs are then retried by the client after 1, 3, 7, 15, 31 s...).
listen_overflows() { nstat -az TcpExtListenOverflows 2>/dev/null | awk '/ListenOverflows/ {print $2}'; }

run_one() {
    local n="${1%%:*}" c=""
    [[ "$1" == *:* ]] && c="${1##*:}"
    local dir="$WORK/cp-$1" log="$WORK/cp-$1.log"
    local common=(--api "http://127.0.0.1:$API_PORT" --admin-token-file "$dir/admin-token"
        --xds "https://127.0.0.1:$XDS_PORT" --ca "$dir/cp-tls/ca.pem" -n "$n")
    start_cp "$dir" "$log"
    echo "## run N=$n${c:+ C=$c}: cp idle RSS $(rss_kb "$CP_PID") KiB"
    "$BIN/xds-load" "${common[@]}" --phase setup
    local t0; t0=$(cpu_ticks "$CP_PID")
    sleep 10
    echo "cp CPU in the 10 s after setup: $(( $(cpu_ticks "$CP_PID") - t0 )) centiseconds"
    local args=("${common[@]}" --phase xds --cp-pid "$CP_PID" --rss-settle "${RSS_SETTLE_SECS:-60}s")
    [[ -n "$c" ]] && args+=(--connections "$c")
    # shellcheck disable=SC2206 # word splitting is the point
    [[ -n "${XDS_LOAD_ARGS:-}" ]] && args+=(${XDS_LOAD_ARGS})
    local status=0 drops; drops=$(listen_overflows)
    "$BIN/xds-load" "${args[@]}" >"$WORK/out-$1.txt" || status=$?
    head -n -1 "$WORK/out-$1.txt"
    echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
    if kill -0 "$CP_PID" 2>/dev/null && [[ "${RSS_SETTLE_SECS:-60}" -gt 0 ]]; then
        # RSS once jemalloc's decay (.cargo/config.toml) has had time to
        # return what the storms freed; compare with "cp RSS all connected".
        sleep "${RSS_SETTLE_SECS:-60}"
        echo "cp RSS ${RSS_SETTLE_SECS:-60} s after the storms (no proxy connected): $(rss_kb "$CP_PID") KiB"
    fi
    [[ -n "$drops" ]] && echo "listen queue overflows during the run (whole machine): $(( $(listen_overflows) - drops ))"
    tail -n 1 "$WORK/out-$1.txt" >>"$WORK/results.jsonl"
    if ! kill -0 "$CP_PID" 2>/dev/null; then
        echo "meshlink-cp exited during the run; last log lines:" >&2
        tail -n 40 "$log" >&2
    fi
    if grep -qiE "panic|ERROR" "$log"; then
        echo "meshlink-cp logged errors:" >&2
        grep -iE "panic|ERROR" "$log" | sort | uniq -c | sort -rn | head -n 20 >&2
    fi
    stop_cp
    [[ $status -eq 0 ]] || { echo "xds-load failed (exit $status)" >&2; exit "$status"; }
}

echo "# meshlink xDS benchmark: $(nproc) cores, $(date -u +%FT%TZ), release build, SQLite store, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in "${RUNS[@]}"; do
    run_one "$r"
done
echo "# JSON results, one line per run"
cat "$WORK/results.jsonl"
[[ -n "${XDS_LOAD_OUT:-}" ]] && cp "$WORK/results.jsonl" "$XDS_LOAD_OUT"
true
