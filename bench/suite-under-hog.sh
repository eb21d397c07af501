#!/usr/bin/env bash
# The whole test suite RUNS times in a row (default 5) beside HOGS busy loops (default 2, one
# per core here), in CI's profile and flags (.ci/run: release, --all-targets, the `cluster`
# and `tantivy` features, the engine crates at opt-level 1). Each run's output goes to OUT/runI.log and one
# line per run to OUT/summary (exit code, seconds, tests passed/failed/ignored). Exits 1 if any
# run failed. BALLOT_DATA is passed through (set it, as .ci/run does, to run the real-log tests).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-5}
HOGS=${HOGS:-2}
OUT=${OUT:-$ROOT/target/hog}
mkdir -p "$OUT"
: >"$OUT/summary"

# shellcheck source=.ci/build-flags
. .ci/build-flags

HOG_PIDS=()
stop_hogs() { for p in "${HOG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$HOGS"); do
  ( while :; do :; done ) &
  HOG_PIDS+=($!)
done

failed=0
for i in $(seq 1 "$RUNS"); do
  start=$(date +%s)
  cargo "${ENGINE_BUILD[@]}" test --release --workspace --all-targets --locked "${FEATURES[@]}" \
    --no-fail-fast >"$OUT/run$i.log" 2>&1
  rc=$?
  counts=$(grep '^test result' "$OUT/run$i.log" \
    | awk '{p+=$4; f+=$6; g+=$8} END {print p" passed, "f" failed, "g" ignored"}')
  line="run $i: exit $rc, $(($(date +%s) - start)) s, $counts"
  echo "$line" | tee -a "$OUT/summary"
  [ "$rc" = 0 ] || failed=1
done
exit "$failed"
