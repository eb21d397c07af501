#!/usr/bin/env bash
# HAProxy side by side, end to end: the same `replica` processes behind ballot (`table`,
# `ch-bl`, `round-robin`) and behind HAProxy 2.6 at each of its settings for the job
# (HAPROXY_CONFIGS, each its own system and row): `haproxy-105`, `haproxy-125`,
# `haproxy-150` (`balance url_param q`, `hash-type consistent`, `hash-balance-factor` N:
# consistent hashing of the whole query with bounded loads, eps = N / 100 - 1) and
# `haproxy-leastconn` (`balance leastconn`), replaying the same test part of the same log.
# The flash is the bottleneck: every replica gets a small RAM cache and an emulated flash of
# FLASH_MBPS.
#
# Data (built once in BENCH_DIR, reused while the knobs match): the embedded synthetic default
# log (200,000 queries, seed 1; shuffled with seed 1, 80% train / 20% test, as everywhere in
# ballot), a small index (`ballot build-index --docs DOCS`, about 210 MB at 1M docs), a voting
# table trained on the train part with the index's exact sizes, and `ballot eval` of the same
# policies, whose JSON gives the per-replica cache bytes (CACHE_FRAC x the log's distinct
# postings bytes, exactly what train and eval simulate) and the simulated miss bytes ratios.
#
# Each system, in turn, gets REPLICAS fresh replicas (cold caches) and a fresh balancer, then:
#   1. warm-up: `ballot replay --part train --queries WARM_QUERIES` (the first WARM_QUERIES
#      train queries; the split is a shuffle, so any train queries are as good as the last
#      ones, and the simulator warms with all 160,000, which would take too long over HTTP);
#      the default looks up about 50 times each replica's cache bytes;
#   2. measurement: `ballot replay --part test --queries TEST_QUERIES --stats-from <replicas>`,
#      closed loop with CONCURRENCY workers (or open loop at RATE); the replicas' /stats
#      deltas over this replay give the measured miss bytes ratio, flash bytes and
#      per-replica query shares, and ballot's /metrics deltas its routing reasons;
#   3. everything is stopped.
# Then it prints one Markdown table (also written to BENCH_DIR/e2e-<tag>/results.md and
# BENCH_DIR/e2e-results.md; the tag names the data knobs and the load): measured miss
# bytes ratio, simulated one (`ballot eval`; HAProxy's closest simulated analogue is ch-bl),
# throughput (ok answers/s), p50 and p99 latency, imbalance (max/mean queries per replica),
# overflow (share of the measured queries ballot sent past its policy's first choice because
# that replica was at the load cap, from ballot's `ballot_requests_total` metric; HAProxy
# does not count it), moved (share late binding moved to another replica: `table-late`),
# flash use (flash bytes read / (elapsed x REPLICAS x FLASH_MBPS)), errors.
#
# Not part of CI. Needs haproxy (installed with apt when missing and a haproxy-* system runs;
# root or sudo), python3, about 220 MB of disk at the default DOCS, and, as an estimate from
# about 1.7 minutes per system and round on 2 cores, about 12 minutes with the defaults (7
# systems; about 24 with ROUNDS=2).
#
# Knobs (environment): BENCH_DIR (default target/bench-e2e), DOCS (1000000), REPLICAS (4),
# CACHE_FRAC (0.05), EVICTION (sieve, the replica's default; or lru, s3fifo: every replica's
# cache, and what the table is trained for and the simulation replays), EPS (0.05;
# ballot's bound; the `haproxy` alias is haproxy-<100 x (1 + EPS)>), FLASH_MBPS
# (10, per replica), FLASH_US (100 us per read), CONCURRENCY (16 closed-loop workers), RATE
# (empty; when set, the measured replay is open loop at RATE queries/s, latency counted from
# each query's intended send time, and the warm-up stays closed loop), WARM_QUERIES (10000),
# TEST_QUERIES (20000; empty = the whole test part, 40,000), HAPROXY_CONFIGS ("105 125 150
# leastconn": the HAProxy systems of the default SYSTEMS, haproxy-N with N > 100 or
# haproxy-leastconn), SYSTEMS ("table ch-bl haproxy-105 haproxy-125 haproxy-150
# haproxy-leastconn round-robin"; any of those, `table-late` (the table with late binding:
# LATE_SLOTS places per replica, 2, and `steal_after_ms` LATE_STEAL_AFTER_MS, 0), any other
# haproxy-N, or `haproxy`, the alias
# of haproxy-<100 x (1 + EPS)>; run in the order given), ROUNDS (1; more runs every system
# again, one row per round), LB_THREADS (1: HAProxy's nbthread and ballot's --workers), BASE_PORT
# (18400: replicas from BASE_PORT, HAProxy BASE_PORT+50, ballot BASE_PORT+60/61), KEEP_LOGS=1
# (keep the processes' logs in BENCH_DIR/e2e-logs), BALLOT_LOAD (auto: ballot's `table` bounds
# the work routed to each replica over its last 10,000 decisions, flash bytes read plus a
# fixed cost per query, and its other policies the queries, as `ballot eval --load auto`
# simulates them; window, work or in-flight for all), BALLOT_CONFIG_EXTRA (top-level TOML lines
# added to ballot's config, `\n`-separated), SKIP_BUILD=1 (use the binaries already in
# target/release), FLASH_PRICE (0; `ballot train --flash-price`, which also balances the
# flash bytes each replica reads), TARGET_VS_HAPROXY (1.3: the table's median throughput over
# the best HAProxy config's at least, the best being the HAProxy system with the highest
# median throughput, when both run; every system must also fail no request; the script exits
# 1 naming each target missed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BENCH_DIR=${BENCH_DIR:-$ROOT/target/bench-e2e}
DOCS=${DOCS:-1000000}
REPLICAS=${REPLICAS:-4}
CACHE_FRAC=${CACHE_FRAC:-0.05}
EVICTION=${EVICTION:-sieve}
EPS=${EPS:-0.05}
FLASH_MBPS=${FLASH_MBPS:-10}
FLASH_US=${FLASH_US:-100}
CONCURRENCY=${CONCURRENCY:-16}
RATE=${RATE:-}
WARM_QUERIES=${WARM_QUERIES:-10000}
TEST_QUERIES=${TEST_QUERIES-20000}
HAPROXY_CONFIGS=${HAPROXY_CONFIGS:-"105 125 150 leastconn"}
ROUNDS=${ROUNDS:-1}
LB_THREADS=${LB_THREADS:-1}
BALLOT_LOAD=${BALLOT_LOAD:-auto}
FLASH_PRICE=${FLASH_PRICE:-0}
TARGET_VS_HAPROXY=${TARGET_VS_HAPROXY:-1.3}
BASE_PORT=${BASE_PORT:-18400}
HAPROXY_PORT=$((BASE_PORT + 50))
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
PORTS=()
for i in $(seq 0 $((REPLICAS - 1))); do PORTS+=($((BASE_PORT + 1 + i))); done
BALANCE_FACTOR=$(awk -v e="$EPS" 'BEGIN { printf "%d", 100 * (1 + e) + 0.5 }')
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# The systems, `haproxy` resolved to its config; a repeated name would overwrite its files.
# shellcheck disable=SC2086 # HAPROXY_CONFIGS is a list of words
SYSTEMS=${SYSTEMS:-"table ch-bl $(haproxy_config_systems $HAPROXY_CONFIGS) round-robin"}
resolve_systems "table table-late ch-bl round-robin"

# --- tools ------------------------------------------------------------------------------
# Any HAProxy config (SYSTEMS holds resolved names only: haproxy-N, haproxy-leastconn).
if [[ " $SYSTEMS " == *" haproxy-"* ]] && ! command -v haproxy >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update && $SUDO apt-get install -y haproxy
fi
command -v python3 >/dev/null || { echo "python3 is needed to read the replay reports" >&2; exit 1; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p balancer-ops -p replica -p pipelines
fi
BIN=$ROOT/target/release
for b in balancer replica ballot; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b" >&2; exit 1; }
done

# Nothing may listen on our ports already: a stale replica would answer in place of a fresh one.
for p in "${PORTS[@]}" "$HAPROXY_PORT" "$BALLOT_PORT" "$BALLOT_ADMIN"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is already in use; stop its process or set BASE_PORT" >&2
    exit 1
  fi
done

# --- data: index, voting table, simulated reference -------------------------------------
mkdir -p "$BENCH_DIR"
INDEX=$BENCH_DIR/index
if [ ! -f "$INDEX/manifest.json" ] ||
  ! grep -q "\"docs\": $DOCS," "$INDEX/manifest.json"; then
  rm -rf "$INDEX"
  "$BIN/ballot" build-index --docs "$DOCS" -o "$INDEX"
fi
SIZES=$INDEX/sizes.parquet
TAG="docs$DOCS-r$REPLICAS-f$CACHE_FRAC-e$EPS-$EVICTION"
[ "$FLASH_PRICE" != 0 ] && TAG="$TAG-fp$FLASH_PRICE"
TABLE=$BENCH_DIR/table-$TAG.parquet
EVAL=$BENCH_DIR/eval-$TAG.json
if [ ! -f "$TABLE" ] || [ "$TABLE" -ot "$INDEX/manifest.json" ]; then
  "$BIN/ballot" train --sizes "$SIZES" --replicas "$REPLICAS" --cache-frac "$CACHE_FRAC" \
    --eviction "$EVICTION" --eps "$EPS" --flash-price "$FLASH_PRICE" -o "$TABLE" --report "$BENCH_DIR/train-$TAG.json" >"$BENCH_DIR/train-$TAG.log" 2>&1 ||
    { tail -20 "$BENCH_DIR/train-$TAG.log" >&2; exit 1; }
fi
if [ ! -f "$EVAL" ] || [ "$EVAL" -ot "$TABLE" ]; then
  "$BIN/ballot" eval --sizes "$SIZES" --replicas "$REPLICAS" --cache-frac "$CACHE_FRAC" \
    --eviction "$EVICTION" --eps "$EPS" --policies round-robin,ch-bl,table --table "$TABLE" --json "$EVAL" >/dev/null
fi
CACHE_BYTES=$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["results"][0]["capacity_bytes"])' "$EVAL")

RUN=$(mktemp -d)
cleanup() {
  stop_all
  if [ "${KEEP_LOGS:-0}" = 1 ]; then
    rm -rf "$BENCH_DIR/e2e-logs" && cp -r "$RUN" "$BENCH_DIR/e2e-logs"
  fi
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

STATS_FROM=$(for p in "${PORTS[@]}"; do printf 'http://127.0.0.1:%s,' "$p"; done)
STATS_FROM=${STATS_FROM%,}
TEST_ARGS=()
[ -n "$TEST_QUERIES" ] && TEST_ARGS=(--queries "$TEST_QUERIES")
if [ -n "$RATE" ]; then
  TEST_ARGS+=(--rate "$RATE")
  LOAD="open loop at $RATE queries/s"
  LOAD_TAG=rate$RATE
else
  TEST_ARGS+=(--concurrency "$CONCURRENCY")
  LOAD="closed loop, $CONCURRENCY workers"
  LOAD_TAG=c$CONCURRENCY
fi
OUT=$BENCH_DIR/e2e-$TAG-$LOAD_TAG-q${TEST_QUERIES:-all}
rm -rf "$OUT"
mkdir -p "$OUT"

echo "replicas: $REPLICAS x replica, index $DOCS docs ($(stat -c %s "$INDEX/postings.bin") postings bytes),"
echo "  cache $CACHE_BYTES bytes each ($CACHE_FRAC of the log's distinct postings bytes), $EVICTION,"
echo "  flash $FLASH_MBPS MB/s + $FLASH_US us per read each"
echo "balancers: $SYSTEMS; ballot eps $EPS, $LB_THREADS thread(s) each;" \
  "$(haproxy -v 2>/dev/null | head -1 | cut -d' ' -f1-3)"
echo "load: warm-up $WARM_QUERIES train queries (closed loop, $CONCURRENCY workers)," \
  "then ${TEST_QUERIES:-all} test queries measured, $LOAD"
echo
for round in $(seq 1 "$ROUNDS"); do
  for sys in $SYSTEMS; do
    tag="$sys-$round"
    start_replicas "$tag"
    if [[ $sys == haproxy-* ]]; then
      start_haproxy "$tag" "$sys"
      target="http://127.0.0.1:$HAPROXY_PORT"
    else
      start_ballot "$tag" "$sys"
      target="http://127.0.0.1:$BALLOT_PORT"
    fi
    t0=$(date +%s)
    replay "$OUT/warm-$tag" --target "$target" --part train --queries "$WARM_QUERIES" \
      --concurrency "$CONCURRENCY"
    t1=$(date +%s)
    if [[ $sys != haproxy-* ]]; then scrape_metrics "$OUT/metrics-before-$tag.txt"; fi
    replay "$OUT/test-$tag" --target "$target" --part test "${TEST_ARGS[@]}" \
      --stats-from "$STATS_FROM"
    if [[ $sys != haproxy-* ]]; then scrape_metrics "$OUT/metrics-after-$tag.txt"; fi
    t2=$(date +%s)
    stop_all
    python3 - "$OUT/test-$tag.json" "$sys" "$round" "$((t1 - t0))" "$((t2 - t1))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["stats"]
print(f"{sys.argv[2]:<12} round {sys.argv[3]}: warm-up {sys.argv[4]} s, test {sys.argv[5]} s: "
      f"{r['throughput_qps']:.1f} ok/s, p99 {r['latency_ms']['p99']:.1f} ms, "
      f"miss bytes ratio {s['miss_bytes_ratio']:.4f}, errors {r['error_total']}")
PY
  done
done

# --- the table --------------------------------------------------------------------------
python3 - "$OUT" "$EVAL" "$REPLICAS" "$FLASH_MBPS" "$ROUNDS" $SYSTEMS <<'PY' | tee "$OUT/results.md"
import json, os, re, sys
out, eval_path, replicas, mbps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
systems = sys.argv[6:]
def reasons(path):
    """ballot_requests_total summed by reason."""
    acc = {}
    for line in open(path):
        m = re.match(r'ballot_requests_total\{(.*)\}\s+(\S+)$', line.strip())
        if m:
            r = re.search(r'reason="([^"]*)"', m.group(1))
            acc[r.group(1)] = acc.get(r.group(1), 0) + float(m.group(2))
    return acc

def overflow_share(sysname, rnd):
    """Share of the measured requests ballot sent past the policy's first choice."""
    before, after = (f"{out}/metrics-{p}-{sysname}-{rnd}.txt" for p in ("before", "after"))
    if not (os.path.exists(before) and os.path.exists(after)):
        return "–"
    b, a = reasons(before), reasons(after)
    d = {k: a.get(k, 0) - b.get(k, 0) for k in a}
    # First attempts: every rule but a retry; overflow by load or by the stall guard.
    routed = sum(v for k, v in d.items() if k != "failover")
    over = d.get("overflow", 0) + d.get("stall-guard", 0)
    return f"{over / routed:.3f}" if routed > 0 else "–"

def moved_share(sysname, rnd):
    """Share of the measured requests late binding moved to another replica (`stolen`)."""
    before, after = (f"{out}/metrics-{p}-{sysname}-{rnd}.txt" for p in ("before", "after"))
    if not (os.path.exists(before) and os.path.exists(after)):
        return "–"
    b, a = reasons(before), reasons(after)
    routed = sum(a.get(k, 0) - b.get(k, 0) for k in a if k != "failover")
    moved = a.get("stolen", 0) - b.get("stolen", 0)
    return f"{moved / routed:.3f}" if routed > 0 else "–"

sim = {r["policy"]: r["miss_bytes_ratio"] for r in json.load(open(eval_path))["results"]}
def name(sysname):
    if sysname == "haproxy-leastconn":
        return "HAProxy leastconn"
    if sysname.startswith("haproxy-"):
        return f"HAProxy consistent + bounded, factor {sysname[len('haproxy-'):]}"
    return f"ballot `{sysname}`"
print()
print("| system | round | measured miss bytes ratio | simulated | throughput (ok/s) | p50 ms | p99 ms "
      "| imbalance | busiest flash share | overflow | moved | flash use | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for sysname in systems:
    for rnd in range(1, rounds + 1):
        r = json.load(open(f"{out}/test-{sysname}-{rnd}.json"))
        s = r["stats"]
        lat = r["latency_ms"]
        use = s["flash_bytes"] / (r["elapsed_s"] * replicas * mbps * 1e6)
        errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
        simv = sim.get(sysname)
        print(f"| {name(sysname)} | {rnd} | {s['miss_bytes_ratio']:.4f} | "
              f"{'–' if simv is None else f'{simv:.4f}'} | {r['throughput_qps']:.1f} | "
              f"{lat['p50']:.1f} | {lat['p99']:.1f} | {s['imbalance']:.3f} | {s['flash_share_max']:.3f} | "
              f"{overflow_share(sysname, rnd)} | {moved_share(sysname, rnd)} | {use:.2f} | {errs} |")
print()
print(f"per-replica query shares and flash bytes: {out}/test-*.txt; JSON reports: {out}/test-*.json")
PY
cp "$OUT/results.md" "$BENCH_DIR/e2e-results.md"

# --- the verdict: the targets it printed, met or the script fails -------------------------
python3 - "$OUT" "$ROUNDS" "$TARGET_VS_HAPROXY" $SYSTEMS <<'PY'
import json, statistics, sys
out, rounds, target = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
systems = sys.argv[4:]
runs = {s: [json.load(open(f"{out}/test-{s}-{r}.json")) for r in range(1, rounds + 1)] for s in systems}
missed = []
for s, rs in runs.items():
    errors = sum(sum(r["errors"].values()) for r in rs)
    if errors:
        missed.append(f"{s}: {errors} failed requests, target 0")
q = {s: statistics.median(r["throughput_qps"] for r in rs) for s, rs in runs.items()}
haproxys = [s for s in runs if s.startswith("haproxy-")]
if "table" in runs and haproxys:
    # HAProxy at its best: the config with the highest median throughput.
    h = max(haproxys, key=lambda s: q[s])
    ratio = q["table"] / q[h] if q[h] else float("inf")
    line = (f"table / the best HAProxy config ({h}) throughput {ratio:.2f}x "
            f"(medians {q['table']:.1f} / {q[h]:.1f} ok/s), target >= {target}")
    if ratio < target:
        missed.append(line)
    else:
        print("target met: " + line)
if missed:
    sys.exit("TARGET MISSED: " + "; ".join(missed))
print("target met: 0 failed requests")
PY
