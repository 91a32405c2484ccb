#!/usr/bin/env bash
# Link transport micro-benchmark (crates/link/benches/link_pair.rs): new
# flows per second and single-flow throughput through a loopback link
# (listener -> router A -> TLS 1.3 yamux link -> router B -> connector)
# against a direct TCP connection, side by side in one run, release build.
# Prints medians, ratios, CPU per unit of work and the load average.
#
# Environment: ROUNDS (5), FLOW_SECS (3), WORKERS (8), BULK_MIB (512),
# CARGO_TARGET_DIR as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p meshlink-link --bench link_pair
