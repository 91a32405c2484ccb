# Process helpers of the pair benchmarks (bench/proxy-pair.sh,
# bench/http-pair.sh). Sourced, not run. The caller sets WORK (where logs
# go) and an array PIDS (what its EXIT trap kills).

# start NAME CMD...: runs CMD in the background with its output in
# $WORK/NAME.log, and sets NAME_PID.
start() {
    local name="$1"
    shift
    "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    printf -v "${name}_PID" '%s' $!
}
# stop PID: SIGTERM and wait.
stop() {
    local pid="$1"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
# wait_for WHAT SECONDS CMD...: polls CMD every 0.1 s until it succeeds.
wait_for() {
    local what="$1" secs="$2"
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            echo "timed out after ${secs}s waiting for $what" >&2
            return 1
        fi
        sleep 0.1
    done
}
# cleanup_work: an EXIT trap: kills what PIDS holds and removes WORK, unless
# the script failed or KEEP_WORK is 1 (then it says where WORK is).
cleanup_work() {
    local status=$?
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ "${KEEP_WORK:-0}" == 1 || $status -ne 0 ]]; then
        echo "work dir (logs, certificates) kept: $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
