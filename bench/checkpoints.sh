#!/usr/bin/env bash
# Per-step checkpoint write on SQLite (issue 15: <= 1 ms per step): the median and p99
# of STEPS (default 2000) `put`s of a CRAG-sized snapshot, one transaction each, next to
# the bound. Release build by default; PROFILE=dev measures the debug build (labelled).
#   bench/checkpoints.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
export STEPS="${1:-2000}"
PROFILE="${PROFILE:-release}"
if [ "$PROFILE" = release ]; then
  nice cargo bench --quiet --bench checkpoint
else
  cargo bench --quiet --profile "$PROFILE" --bench checkpoint
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (figures on a loaded machine are upper bounds)"
