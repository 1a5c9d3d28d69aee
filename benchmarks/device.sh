#!/usr/bin/env bash
# The GPU path measured (issue 18), run as is from the repository root on a GPU machine: `bash benchmarks/device.sh`.
# Triton kernels bit-exact and in GB/s against a device-to-device copy_, training tokens/s in full precision and
# W4A4, the smoke DAG's wall time: `qscaling bench device`, which receives this script's arguments (`--help`).
# Results: $OUT/device-bench.json (and .log) when OUT is set, else benchmarks/results/device-<UTC time>.json.
# About 5 minutes on one H200, most of it the smoke DAG (capped by --dag-timeout, 300 s).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${QSCALING_PYTHON:-}" ]]; then
  python=$QSCALING_PYTHON
elif [[ -f .venv/.installed ]]; then
  python=.venv/bin/python
elif python3 -c 'import sys, torch; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null; then
  # python3 is itself a virtual environment with the machine's torch; a venv made from it would not see its
  # packages, so use it as it is, with qscaling from src/.
  python=python3
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
elif PIP_RETRIES=0 PIP_TIMEOUT=15 make venv USE_SYSTEM_TORCH=1; then
  python=.venv/bin/python
else
  echo "device.sh: make venv USE_SYSTEM_TORCH=1 failed (no package index?); using python3 with src/ on PYTHONPATH" >&2
  python=python3
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi

if [[ -n "${OUT:-}" ]]; then
  results=$OUT/device-bench.json
else
  results=benchmarks/results/device-$(date -u +%Y%m%dT%H%M%SZ).json
fi
mkdir -p "$(dirname "$results")"
export PYTHONUNBUFFERED=1
"$python" -m qscaling.cli bench device --out "$results" "$@" 2>&1 | tee "${results%.json}.log"
