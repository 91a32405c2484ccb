# Helpers shared by the benchmark scripts that run a release meshlink-cp
# (xds-load.sh, list-rss.sh). Sourced, not run. The caller sets BIN (the
# release binaries), API_PORT and XDS_PORT; start_cp sets CP_PID. CP_ARGS
# adds flags to `meshlink-cp run` (e.g. "--xds-stream-burst 20000
# --xds-streams-per-second 100000" to measure storms without admission).
# CP_BIN runs another meshlink-cp binary than $BIN/meshlink-cp. CP_HOST
# (127.0.0.1) is the address both ports listen on.

# Resident set size of a process, in KiB.
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Peak resident set size since start or since reset_peak_rss, in KiB.
peak_rss_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
# Resets the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0).
reset_peak_rss() { echo 5 >"/proc/$1/clear_refs"; }
# User + system CPU of a process, in clock ticks (centiseconds).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# start_cp DATA_DIR LOG: starts meshlink-cp and waits until /readyz answers.
start_cp() {
    local dir="$1" log="$2"
    RUST_LOG="${RUST_LOG:-warn}" "${CP_BIN:-$BIN/meshlink-cp}" run --data-dir "$dir" \
        --api-addr "${CP_HOST:-127.0.0.1}:$API_PORT" --xds-addr "${CP_HOST:-127.0.0.1}:$XDS_PORT" \
        --grant-addr "${CP_HOST:-127.0.0.1}:0" \
        ${CP_ARGS:-} >>"$log" 2>&1 &
    CP_PID=$!
    for _ in $(seq 1 200); do
        curl -fs "http://${CP_HOST:-127.0.0.1}:$API_PORT/readyz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "meshlink-cp did not become ready; its log:" >&2
    cat "$log" >&2
    exit 1
}

# stop_cp: SIGTERM and wait.
stop_cp() {
    kill "$CP_PID" 2>/dev/null || true
    wait "$CP_PID" || true
    CP_PID=
}
