#!/usr/bin/env bash
# Issue 34's HTTP benchmark: four variants side by side in one run, all on
# loopback, the app being `http-load serve` (HTTP/1.1 keep-alive, 1 KiB body):
#   direct         client -> app (the physical limit)
#   haproxy-http   client -> haproxy A (mode http) -> mTLS, HTTP/2 (ALPN h2,
#                  http-reuse always) -> haproxy B (mode http) -> app
#   meshlink-tcp   client -> meshlink-proxy A -> mTLS -> meshlink-proxy B -> app,
#                  the service on `tcp` (bytes copied)
#   meshlink-http  the same pair, the service on `kuma.io/protocol: http`
#                  (routed per request; HTTP/2 over mTLS between the sidecars)
# and issue 36's policy variants of the http pair (bench/lib/http-setup.sh,
# policy_on; each applied before its turn in a round and deleted after):
#   meshlink-http+accesslog  access logging on (JSON lines to a file)
#   meshlink-http+trace      tracing on at 100 % sampling (OTLP/HTTP export)
#   meshlink-http+faultmiss  a 10 % fault-injection delay present on B's
#                            inbound but matching no request
# One meshlink-cp configures every meshlink variant (one client sidecar with
# two outbounds, one server sidecar per variant). Rounds interleave the
# variants. Figures per round and variant:
#   - wrk -t2 -c16 (HTTP/1.1 keep-alive) requests/s, and the two proxies' CPU
#     per request over that run (utime+stime from /proc/PID/stat);
#   - latency p50/p99 at a fixed RATE (default 1,000 req/s) over 10
#     keep-alive connections (`http-load latency`: open loop);
#   - h2load -c 10 -m 10 requests/s (HTTP/2 cleartext from the client; only
#     the HTTP variants: the app and a byte-copying pair speak HTTP/1.1);
#   - each proxy's RSS idle, after set-up, and its peak with 1,000 HTTP/2
#     streams open (h2load -c 10 -m 100, the HTTP variants, once per run).
# Prints the medians over ROUNDS in a markdown table with ratios, and the load
# average at start and end. No figure is checked against a threshold.
#
#   bench/http-pair.sh
#
# Environment: VARIANTS (all of the above), ROUNDS (3), WRK_DURATION (10s), LAT_DURATION (10s), RATE (1000),
# H2_REQUESTS (100000), PORT_BASE (28830; 14 ports from it), HTTP_PAIR_KEEP=1
# (keep the work dir). Needs haproxy, wrk, h2load (nghttp2-client), jq and
# openssl; installs the missing ones with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
WRK_DURATION="${WRK_DURATION:-10s}"
LAT_DURATION="${LAT_DURATION:-10s}"
RATE="${RATE:-1000}"
H2_REQUESTS="${H2_REQUESTS:-100000}"
read -r -a VARIANTS <<<"${VARIANTS:-direct haproxy-http meshlink-tcp meshlink-http meshlink-http+accesslog meshlink-http+trace meshlink-http+faultmiss}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/meshlink-target}"

# shellcheck source=bench/lib/http-setup.sh
source bench/lib/http-setup.sh
install_missing haproxy wrk h2load jq openssl
build_release
# shellcheck source=bench/lib/cp.sh
source bench/lib/cp.sh
# shellcheck source=bench/lib/certs.sh
source bench/lib/certs.sh

WORK="$(mktemp -d /tmp/http-pair.XXXXXX)"
PIDS=()
KEEP_WORK="${HTTP_PAIR_KEEP:-0}"
# shellcheck source=bench/lib/proc.sh
source bench/lib/proc.sh
trap cleanup_work EXIT
trap 'exit 130' INT TERM

cpu_ms() { echo $(($(cpu_ticks "$1") * 1000 / $(getconf CLK_TCK))); }

echo "# meshlink HTTP benchmark: $(nproc) cores, $(date -u +%FT%TZ), rounds $ROUNDS"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

http_pair_setup

proxy_cpu() {
    local total=0 pid
    for pid in $(pids_of "$1"); do total=$((total + $(cpu_ms "$pid"))); done
    echo "$total"
}

RESULTS="$WORK/results.tsv" # variant, figure, value
for v in haproxy-http meshlink-tcp meshlink-http; do
    read -r a b <<<"$(pids_of "$v")"
    printf '%s\trss_idle_a_kib\t%s\n%s\trss_idle_b_kib\t%s\n' "$v" "$(rss_kb "$a")" "$v" "$(rss_kb "$b")" >>"$RESULTS"
done
for r in $(seq 1 "$ROUNDS"); do
    for v in "${VARIANTS[@]}"; do
        target=$(target_of "$v")
        echo "round $r/$ROUNDS: $v" >&2
        policy_on "$v"
        cpu0=$(proxy_cpu "$v")
        wrk -t2 -c16 -d "$WRK_DURATION" "http://$target/" >"$WORK/wrk.txt"
        rps=$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk.txt")
        reqs=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
        errors=$(awk '/Non-2xx|Socket errors/ {print}' "$WORK/wrk.txt")
        [[ -n "$errors" ]] && echo "# $v round $r wrk: $errors"
        printf '%s\twrk_rps\t%s\n' "$v" "$rps" >>"$RESULTS"
        if [[ $v != direct ]]; then
            printf '%s\tcpu_us_per_req\t%s\n' "$v" "$((($(proxy_cpu "$v") - cpu0) * 1000 / reqs))" >>"$RESULTS"
        fi
        "$BIN/http-load" latency --target "$target" --rate "$RATE" --duration "$LAT_DURATION" >"$WORK/lat.json"
        printf '%s\tp50_us\t%s\n%s\tp99_us\t%s\n' "$v" "$(jq .lat_p50_us "$WORK/lat.json")" \
            "$v" "$(jq .lat_p99_us "$WORK/lat.json")" >>"$RESULTS"
        if [[ $v == *-http* ]]; then
            h2load -c 10 -m 10 -n "$H2_REQUESTS" "http://$target/" >"$WORK/h2.txt"
            printf '%s\th2_rps\t%s\n' "$v" "$(awk '/^finished in/ {gsub(",", ""); print $4}' "$WORK/h2.txt")" >>"$RESULTS"
            grep -E '^requests:' "$WORK/h2.txt" | sed "s/^/# $v round $r h2load /"
        fi
        policy_off "$v"
    done
done
# Peak RSS of each proxy with 1,000 HTTP/2 streams open at once (h2load
# -c 10 -m 100: 10 connections of 100 streams from the client).
for v in haproxy-http meshlink-http; do
    read -r a b <<<"$(pids_of "$v")"
    reset_peak_rss "$a"
    reset_peak_rss "$b"
    h2load -c 10 -m 100 -n "$H2_REQUESTS" "http://$(target_of "$v")/" >"$WORK/h2-1000.txt"
    grep -E '^requests:' "$WORK/h2-1000.txt" | sed "s/^/# $v 1,000 streams h2load /"
    printf '%s\trss_1000_streams_a_kib\t%s\n%s\trss_1000_streams_b_kib\t%s\n' "$v" "$(peak_rss_kb "$a")" "$v" "$(peak_rss_kb "$b")" >>"$RESULTS"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians per variant and figure, and the ratios the issue asks for.
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
fig() { awk -F'\t' -v v="$1" -v f="$2" '$1 == v && $2 == f {print $3}' "$RESULTS" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
echo
echo "| figure | direct | haproxy-http | meshlink-tcp | meshlink-http | meshlink-http / haproxy-http |"
echo "|---|---|---|---|---|---|"
for f in wrk_rps cpu_us_per_req p50_us p99_us h2_rps rss_idle_a_kib rss_idle_b_kib rss_1000_streams_a_kib rss_1000_streams_b_kib; do
    d=$(fig direct "$f") h=$(fig haproxy-http "$f") t=$(fig meshlink-tcp "$f") m=$(fig meshlink-http "$f")
    echo "| $f | $d | $h | $t | $m | $(ratio "$m" "$h") |"
done
# The policy variants against the plain http pair: medians, the ratio, and
# each figure's spread over the rounds (min-max), since "indistinguishable"
# means within the spread.
spread() { awk -F'\t' -v v="$1" -v f="$2" '$1 == v && $2 == f {print $3}' "$RESULTS" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) print lo "-" hi; else print "-"}'; }
policies=()
for v in "${VARIANTS[@]}"; do [[ $v == meshlink-http+* ]] && policies+=("$v"); done
if [[ ${#policies[@]} -gt 0 ]]; then
    echo
    head="| figure | meshlink-http (spread) |"
    for v in "${policies[@]}"; do head+=" ${v#meshlink-http} (spread) | / meshlink-http |"; done
    echo "$head"
    echo "|---|---|$(for _ in "${policies[@]}"; do printf -- '---|---|'; done)"
    for f in wrk_rps cpu_us_per_req p50_us p99_us h2_rps; do
        m=$(fig meshlink-http "$f")
        line="| $f | $m ($(spread meshlink-http "$f")) |"
        for v in "${policies[@]}"; do line+=" $(fig "$v" "$f") ($(spread "$v" "$f")) | $(ratio "$(fig "$v" "$f")" "$m") |"; done
        echo "$line"
    done
fi
echo
http_p50=$(fig meshlink-http p50_us) tcp_p50=$(fig meshlink-tcp p50_us)
if [[ $http_p50 != - && $tcp_p50 != - ]]; then
    echo "# http mode against tcp mode on the same pair: added p50 $(awk -v a="$http_p50" -v b="$tcp_p50" 'BEGIN {printf "%+.1f", a - b}') us"
fi
echo "# raw figures (variant, figure, value)"
cat "$RESULTS"
