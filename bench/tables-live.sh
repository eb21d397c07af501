#!/usr/bin/env bash
# Two (or more) voting tables served live, each in turn, on the same replicas and the same
# queries of a partitioned log: which one serves more? This is the live check of a `ballot
# retrain` decision (docs/operations.md, "Retraining on a schedule").
#
# For each round and each table: REPLICAS fresh `replica` processes (cold caches) over one
# index built from the days read, a fresh `balancer` serving the table (load `work`, as
# retrain simulates a table), then
#   1. warm-up: `ballot replay` of the days WARM_FROM..WARM_TO, closed loop, not measured;
#   2. measurement: `ballot replay` of TEST_DAY, closed loop with CONCURRENCY workers
#      (throughput at saturation), the replicas' /stats deltas giving the flash bytes each
#      replica read (`--stats-from`);
#   3. everything stopped.
# Then one Markdown table: per table and round, throughput (ok answers/s), p99, the
# busiest replica's flash bytes per query (its flash bytes over all the queries), all
# replicas' flash bytes per query, the busiest replica's share, errors; and the ratio of the
# tables' median throughputs. Also written to BENCH_DIR/results.md.
#
# Not part of CI. Needs python3 (to read the replay reports) and a few minutes per round.
#
# Knobs (environment): LOG (a partitioned log directory, date=YYYY-MM-DD/...), FREQ (the
# word-frequency TSV of the size model), TABLES (the tables, space-separated), WARM_FROM,
# WARM_TO, TEST_DAY (dates), INDEX_FROM (WARM_FROM: the first day whose terms the index and
# the cache size count; set it to the first train day of a retrain run), REPLICAS (8), CACHE_FRAC (0.05 of the index's postings bytes per
# replica, which are the distinct postings bytes of the days read, as retrain counts them),
# DOCS (1000000, the index's documents: the size model's N), EVICTION (sieve), EPS (0.05),
# FLASH_MBPS (4 per replica, the bottleneck), FLASH_US (100), CONCURRENCY (32), ROUNDS (2),
# BENCH_DIR (target/bench-tables), BASE_PORT (18600), SKIP_BUILD=1 (use the binaries in
# target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

: "${LOG:?set LOG to a partitioned log directory}"
: "${FREQ:?set FREQ to the word-frequency TSV}"
: "${TABLES:?set TABLES to the voting tables to compare}"
: "${WARM_FROM:?}" "${WARM_TO:?}" "${TEST_DAY:?}"
INDEX_FROM=${INDEX_FROM:-$WARM_FROM}
REPLICAS=${REPLICAS:-8}
CACHE_FRAC=${CACHE_FRAC:-0.05}
DOCS=${DOCS:-1000000}
EVICTION=${EVICTION:-sieve}
EPS=${EPS:-0.05}
FLASH_MBPS=${FLASH_MBPS:-4}
FLASH_US=${FLASH_US:-100}
CONCURRENCY=${CONCURRENCY:-32}
ROUNDS=${ROUNDS:-2}
BENCH_DIR=${BENCH_DIR:-$ROOT/target/bench-tables}
BASE_PORT=${BASE_PORT:-18600}
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
PORTS=()
for i in $(seq 0 $((REPLICAS - 1))); do PORTS+=($((BASE_PORT + i))); done
for t in $TABLES; do [ -f "$t" ] || { echo "no table $t" >&2; exit 2; }; done
command -v python3 >/dev/null || { echo "python3 is needed to read the replay reports" >&2; exit 1; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release --locked -p pipelines -p replica -p balancer-ops --bins
fi
BIN=$ROOT/target/release
for b in balancer replica ballot; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b" >&2; exit 1; }
done
for p in "${PORTS[@]}" "$BALLOT_PORT" "$BALLOT_ADMIN"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is already in use; stop its process or set BASE_PORT" >&2
    exit 1
  fi
done

# --- the index of the days read, and the cache size ---------------------------------------
mkdir -p "$BENCH_DIR"
INDEX=$BENCH_DIR/index-$INDEX_FROM-$TEST_DAY-docs$DOCS
if [ ! -f "$INDEX/manifest.json" ]; then
  "$BIN/ballot" build-index --log "$LOG" --from "$INDEX_FROM" --to "$TEST_DAY" --freq "$FREQ" \
    --docs "$DOCS" -o "$INDEX.tmp"
  mv "$INDEX.tmp" "$INDEX"
fi
CACHE_BYTES=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
print(int(m["postings_bytes"] * float(sys.argv[2])))' "$INDEX" "$CACHE_FRAC")

RUN=$(mktemp -d)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
trap 'stop_all; rm -rf "$RUN"' EXIT
trap 'exit 130' INT TERM


start_cluster() { # tag table
  local i
  start_replicas "$1"
  {
    echo "listen = \"127.0.0.1:$BALLOT_PORT\""
    echo "admin_listen = \"127.0.0.1:$BALLOT_ADMIN\""
    echo "admin_token = \"bench\""
    echo "eps = $EPS"
    echo "load = \"work\""
    echo "request_timeout_ms = 30000"
    echo "[policy]"
    echo "name = \"table\""
    echo "table = \"$2\""
    echo "sizes = \"$INDEX/sizes.parquet\""
    for i in $(seq 0 $((REPLICAS - 1))); do
      echo "[[replicas]]"
      echo "name = \"r$i\""
      echo "address = \"127.0.0.1:${PORTS[$i]}\""
    done
  } >"$RUN/$1-balancer.toml"
  "$BIN/balancer" --config "$RUN/$1-balancer.toml" >"$RUN/$1-balancer.log" 2>&1 &
  PIDS+=($!)
  wait_line "$RUN/$1-balancer.log" "^listening on" $!
}

replay_log() { # out-prefix replay-args...: lib.sh's replay of LOG through the balancer
  local out=$1
  shift
  replay "$out" --target "http://127.0.0.1:$BALLOT_PORT" --log "$LOG" --part all --timeout 60s "$@"
}

STATS_FROM=$(for p in "${PORTS[@]}"; do printf 'http://127.0.0.1:%s,' "$p"; done)
STATS_FROM=${STATS_FROM%,}
OUT=$BENCH_DIR/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "index: $INDEX ($DOCS docs); $REPLICAS replicas, cache $CACHE_BYTES bytes each ($CACHE_FRAC), $EVICTION, flash $FLASH_MBPS MB/s + $FLASH_US us"
echo "warm-up: $WARM_FROM..$WARM_TO; measured: $TEST_DAY, closed loop, $CONCURRENCY workers; $ROUNDS round(s)"
NAMES=()
for round in $(seq 1 "$ROUNDS"); do
  n=0
  for table in $TABLES; do
    n=$((n + 1))
    tag="t$n-$round"
    NAMES+=("$tag=$table")
    start_cluster "$tag" "$table"
    replay_log "$OUT/warm-$tag" --from "$WARM_FROM" --to "$WARM_TO" --concurrency "$CONCURRENCY"
    replay_log "$OUT/test-$tag" --from "$TEST_DAY" --to "$TEST_DAY" --concurrency "$CONCURRENCY" \
      --stats-from "$STATS_FROM"
    stop_all
    echo "  $tag ($table): $(grep -m1 -E 'throughput|ok/s|q/s' "$OUT/test-$tag.txt" || true)"
  done
done

python3 - "$OUT" "${NAMES[@]}" <<'PY' | tee "$OUT/results.md"
import json, statistics, sys
out, names = sys.argv[1], [n.split("=", 1) for n in sys.argv[2:]]
print()
print("| table | round | throughput (ok/s) | p99 ms | busiest replica flash bytes/query | all replicas flash bytes/query | busiest flash share | measured miss bytes ratio | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
by_table = {}
for tag, path in names:
    r = json.load(open(f"{out}/test-{tag}.json"))
    s = r["stats"]
    q = max(r["ok"], 1)
    flash = [x["delta"]["flash_bytes"] for x in s["replicas"]]
    errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
    by_table.setdefault(path, []).append(r["throughput_qps"])
    print(f"| {path} | {tag.split('-')[1]} | {r['throughput_qps']:.1f} | {r['latency_ms']['p99']:.1f} | "
          f"{max(flash) / q:.0f} | {sum(flash) / q:.0f} | {max(flash) / max(sum(flash), 1):.3f} | "
          f"{s['miss_bytes_ratio']:.4f} | {errs} |")
print()
med = {p: statistics.median(v) for p, v in by_table.items()}
first = next(iter(med))
for p, m in med.items():
    print(f"median throughput {p}: {m:.1f} ok/s ({m / med[first]:.3f}x the first)")
PY
