#!/usr/bin/env bash
# Regenerate reference/<scale>/ from a fresh run of the default target: the artifacts `qscaling diff` compares
# (figures, fitted laws, claims, metric tables), never checkpoints or token shards.
#   reference/regenerate.sh smoke default      (what `make reference` runs)
# Commit the result together with the change that moved it; tests/test_reference.py diffs the suite's own smoke
# run against reference/smoke. Both run in reproducible CPU mode (qscaling.reproducible) on 2 cores, the suite's
# `--cores`, so that any x86-64 machine with AVX2 makes the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
CORES=${CORES:-2}
eval "$("$BIN/python" -m qscaling.reproducible)"
for scale in "${@:-smoke}"; do
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/qscaling-reference-$scale.XXXXXX")
  "$BIN/qscaling" run --cores "$CORES" --directory "$workdir" --config "scale=$scale"
  "$BIN/python" -c 'import sys; from qscaling.diff.artifacts import export_artifacts; export_artifacts(*sys.argv[1:])' \
    "$workdir" "reference/$scale"
  if [ "$scale" != smoke ]; then
    # Past smoke, only what the README reads (figures, claims, study tables, fits, learning-curve evaluations): the
    # per-checkpoint rows the tables are built from would take the reference past its 24 MB (tests/test_reference.py).
    find "reference/$scale/results" -mindepth 1 -maxdepth 1 -type d ! -name tables ! -name fits ! -name evals \
      -exec rm -rf {} +
  fi
  rm -rf "$workdir"
  echo "reference/$scale regenerated"
done
