#!/usr/bin/env bash
# Issue 10's link benchmark: a direct connection, the meshlink sidecar pair
# and a meshlink link (client -> router B's Listener -> TLS 1.3 link ->
# router A's Connector -> server, two real sites) side by side in one run
# of bench/proxy-pair.sh: new flows per second, single-flow throughput,
# latency p50/p99 at 1,000 req/s, router RSS and CPU idle, under load and
# with 1,000 open flows. Medians over ROUNDS, with ratios.
#
#   bench/link-pair.sh            (VARIANTS="direct meshlink link" by default)
#
# Every environment variable of bench/proxy-pair.sh applies.
set -euo pipefail
cd "$(dirname "$0")/.."
export VARIANTS="${VARIANTS:-direct meshlink link}"
exec bench/proxy-pair.sh "$@"
