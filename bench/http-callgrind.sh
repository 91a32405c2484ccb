#!/usr/bin/env bash
# CPU cost per request through each HTTP pair as instruction counts, which
# repeat across boxes where seconds do not: the four proxies of
# bench/http-pair.sh (haproxy A and B in `mode http`; meshlink A with a
# `tcp` server sidecar BT and an `http` one BH) run under
# `valgrind --tool=callgrind`. Per variant: warm up, zero the counters,
# send REQUESTS requests, dump, and divide each proxy's instructions (Ir)
# by the requests. Two loads per variant:
#   h1  HTTP/1.1 keep-alive from the client, 4 connections (h2load --h1);
#   h2  HTTP/2 cleartext from the client, 4 connections x 10 streams (the
#       HTTP variants only: a byte-copying pair and the app speak HTTP/1.1).
# Last, the policy variants of issue 36 (CPU per request with a policy on;
# bench/lib/http-setup.sh, policy_on): the http pair again with, in turn,
# `+accesslog` (a JSON line per request to a file on both sidecars),
# `+trace` (100 % sampling, OTLP/HTTP export) and `+faultmiss` (a fault
# policy that matches no request). Prints a markdown table with the ratios
# to haproxy and to the plain http pair. The callgrind files
# stay in the work dir with HTTP_PAIR_KEEP=1 (callgrind_annotate them).
#
#   bench/http-callgrind.sh
#
# Environment: REQUESTS (2000), PORT_BASE (28860), VARIANTS (all of the
# above, in that order), HTTP_PAIR_KEEP=1.
# Needs valgrind, haproxy, h2load (nghttp2-client), jq and openssl;
# installs the missing ones with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${REQUESTS:-2000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"

PORT_BASE="${PORT_BASE:-28860}"
# shellcheck source=bench/lib/http-setup.sh
source bench/lib/http-setup.sh
install_missing valgrind haproxy h2load jq openssl
build_release
WORK="$(mktemp -d /tmp/http-callgrind.XXXXXX)"
PIDS=()
KEEP_WORK="${HTTP_PAIR_KEEP:-0}"
# shellcheck source=bench/lib/proc.sh
source bench/lib/proc.sh
# shellcheck source=bench/lib/cp.sh
source bench/lib/cp.sh
# shellcheck source=bench/lib/certs.sh
source bench/lib/certs.sh
trap cleanup_work EXIT
trap 'exit 130' INT TERM

echo "# meshlink HTTP pair under callgrind: $(nproc) cores, $(date -u +%FT%TZ), $REQUESTS requests per load"
WRAP_PROXY="valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.%p.out"
WAIT_SECS=300 http_pair_setup

# instructions PID: the Ir total of PID's latest callgrind dump.
instructions() {
    local latest
    latest=$(ls -t "$WORK"/callgrind."$1".out* | head -1)
    awk '/^(summary|totals):/ {print $2; exit}' "$latest"
}
# measure VARIANT LOAD H2LOAD_ARGS...: one load, Ir per request of A and B.
measure() {
    local v="$1" load="$2"
    shift 2
    local target pid a b
    target=$(target_of "$v")
    h2load "$@" -n 200 "http://$target/" >/dev/null # warm-up: connections, pools, caches
    for pid in $(pids_of "$v"); do callgrind_control -z "$pid" >/dev/null 2>&1; done
    local out="$WORK/h2load-$v-$load.txt"
    h2load "$@" -n "$REQUESTS" "http://$target/" >"$out"
    grep -q "succeeded, 0 failed, 0 errored" "$out" || {
        echo "# $v $load: requests failed: $(grep -E '^(requests|status codes):' "$out" | tr '\n' ' ')"
    }
    for pid in $(pids_of "$v"); do callgrind_control -d "$pid" >/dev/null 2>&1; done
    read -r a b <<<"$(pids_of "$v")"
    printf '%s\t%s\t%s\t%s\n' "$v" "$load" "$(($(instructions "$a") / REQUESTS))" \
        "$(($(instructions "$b") / REQUESTS))" >>"$WORK/results.tsv"
}
VARIANTS="${VARIANTS:-haproxy-http meshlink-tcp meshlink-http meshlink-http+accesslog meshlink-http+trace meshlink-http+faultmiss}"
for v in $VARIANTS; do
    policy_on "$v"
    echo "measuring $v" >&2
    measure "$v" h1 --h1 -c 4
    if [[ $v == *-http* ]]; then measure "$v" h2 -c 4 -m 10; fi
    policy_off "$v"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || b == "") print "-"; else printf "%.2f", a / b }'; }
echo
echo "| load | variant | A Ir/request | B Ir/request | A + B | / haproxy-http | / meshlink-http |"
echo "|---|---|---|---|---|---|---|"
sum_of() { awk -F'\t' -v v="$1" -v l="$2" '$1 == v && $2 == l {print $3 + $4}' "$WORK/results.tsv"; }
while IFS=$'\t' read -r v load a b; do
    echo "| $load | $v | $a | $b | $((a + b)) | $(ratio $((a + b)) "$(sum_of haproxy-http "$load")") | $(ratio $((a + b)) "$(sum_of meshlink-http "$load")") |"
done <"$WORK/results.tsv"
