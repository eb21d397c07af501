#!/usr/bin/env bash
# ballot in front of a search engine it did not write, measured by the kernel (issue 30).
#
# REPLICAS Tantivy search servers (`tantivy-engine serve`: the tantivy crate, tantivy-cli's
# `GET /api/?q=` API), each over its own copy of one Tantivy index holding the documents of
# `ballot build-index --docs DOCS`. Each server runs in its own cgroup (v1): a memory cgroup
# whose limit, set after the warm-up, leaves it CACHE_BYTES of page cache above what the
# process itself uses (the page cache is its RAM cache; result.json reports the page cache
# each server had at its start and at the end of the saturation phase), and a block-IO cgroup
# that throttles its reads from the index's block device to FLASH_MBPS (the flash). Postings
# are read with pread (POSTINGS_IO), read-ahead off. The term dictionary is mapped through
# the page cache (DICTIONARY=page-cache, the default, as Elasticsearch's hybridfs maps the
# terms index), so its pages compete with the postings for the same cgroup page-cache budget;
# DICTIONARY=ram reads it into the process at start and leaves the page cache to postings.
# Nothing of ballot runs inside the servers: they send no miss-bytes header and no load
# report, so ballot's `table` bounds the work its shadow caches estimate (`work_source =
# "shadow"`), with the size table `ballot sizes --tantivy` reads from the index's own term
# dictionary (postings bytes: the shadow caches do not see the dictionary's pages).
#
# Systems (SYSTEMS), each run with fresh servers and a fresh load balancer:
#   ballot's `round-robin`, `ch-bl` and `table` (ballot's default, the system judged);
#   HAProxy at each setting of HAPROXY_CONFIGS: `haproxy-105`, `haproxy-125`, `haproxy-150`
#   (`balance url_param q`, consistent hashing with bounded loads, `hash-balance-factor` N)
#   and `haproxy-leastconn` (`balance leastconn`); `haproxy` stays an alias of
#   haproxy-<100 x (1 + EPS)>;
#   the peers, ballot's balancer running their rules: `ars` (Elasticsearch's adaptive
#   replica selection), `stable-hash` (Solr's stable hash), `prequal`, `cache-aware`
#   (SGLang-style routing by the balancer's shadow caches, its `[shadow]` section).
# ballot's load bound, as `ballot eval --load auto`: `work` for table, `window` for every
# other ballot system (ars and prequal read the requests in flight themselves).
#
# Each system-run starts cold. First `sync` and `echo 1 > /proc/sys/vm/drop_caches`: the
# index copies' pages may still be in the kernel's page cache from an earlier run, charged to
# a cgroup since removed, where a fresh server would hit them without its own cgroup counting
# them. Then fresh cgroups and servers (each also evicts its copy's pages at start), and,
# before the warm-up, at most START_CACHE_MAX_BYTES of each server's index copy may be in the
# page cache (util-linux `fincore`), or the script stops naming the server; the cgroup's own
# figure (memory.stat total_cache, which also counts the program's mapped pages) is recorded
# as start_cache_bytes. Then:
# warm-up (WARM_QUERIES train queries, closed loop), saturation (the first TEST_QUERIES test
# queries, closed loop with CONCURRENCY workers: queries/s), steady (the next STEADY_QUERIES
# test queries, `--skip TEST_QUERIES`, so none the saturation phase served, open loop at LOAD
# x the steady rate: p99 at equal offered load over warm caches). The steady rate is fixed
# once, by the saturation of the first run (SYSTEMS' first system in round 1). The systems
# run ROUNDS times in rotated order (round k starts at SYSTEMS' k-th system), so no system
# always runs first or after the same neighbour; each run's files carry its round (-rK).
# Bytes read from the device per server come from the kernel's
# `blkio.throttle.io_service_bytes` over the saturation phase; the shadow caches' estimate
# from ballot's `ballot_shadow_miss_bytes_total` over the same phase.
#
# POSTINGS_IO=pread is the reported default; the mmap result is reported beside it, by a
# second run with POSTINGS_IO=mmap (and its own RUN_NAME).
#
# Writes target/engine-e2e/<RUN_NAME>/result.json: {"setup": {...}, "rows": [one per system:
# system, saturation_qps and steady_p99_ms (medians over the rounds) and their spreads ([min,
# max]), device_read_bytes, measured_flash_share_max, shadow_flash_share_max,
# shadow_miss_bytes, page_cache_bytes and start_cache_bytes per server (medians; the largest
# at the end as page_cache_bytes_max), errors (all rounds), rounds (one dict per round)]} and
# results.md; prints the spread between rounds of each system and exits 1 naming each target
# missed, on the medians: table >= 1.5x round-robin's saturation queries/s, p99 <= 0.5x
# round-robin's, device bytes <= 0.6x round-robin's; table >= 1.3x the best HAProxy config's
# queries/s; table >= 1.2x the best peer's queries/s and p99 <= 0.8x that peer's at equal
# offered load (peers: every system but table, round-robin and ch-bl; the best: the highest
# median queries/s); the shadow estimate of the busiest server's share within 0.03 of the
# kernel's; 0 errors in every run.
#
# Time: about 3.7 minutes per system-run (22 took 81 min 46 s), so 80 minutes with the defaults
# (11 systems x 2 rounds = 22 runs), plus the data's one-time build.
#
# Needs root (cgroups, drop_caches), cgroup v1 memory and blkio controllers, a writable
# /proc/sys/vm/drop_caches, an index directory on a block device, haproxy (installed with apt
# when missing and a haproxy-* system runs), python3; about 1.5 GB of disk at the default
# DOCS. Where the machine lacks any of these it says so and stops: an unthrottled, unlimited
# or warm-started run is never reported.
#
# Knobs (environment): BENCH_DIR (target/engine-e2e), RUN_NAME (date-time), DOCS (1000000),
# REPLICAS (8, as the demo), CACHE_FRAC (0.05: the page cache of each server, as a fraction of
# the log's distinct postings bytes, as the demo's caches), SHADOW_EVICTION (lru: what the
# shadow caches and the table's training assume the kernel does), FLASH_MBPS (1 per server),
# EPS (0.05), CONCURRENCY (16), WARM_QUERIES (10000), TEST_QUERIES (8000), STEADY_QUERIES
# (4000; test queries TEST_QUERIES+1 on), LOAD (0.6: at 0.8 round-robin timed out requests
# at its own saturation's 0.8 on the unseen steady queries), HAPROXY_CONFIGS ("105 125 150
# leastconn": the HAProxy systems of the default SYSTEMS), SYSTEMS ("round-robin ch-bl
# haproxy-105 haproxy-125 haproxy-150 haproxy-leastconn ars stable-hash prequal cache-aware
# table"; the first sets the steady rate; also `table-evidence` and `table-late`, the table
# with late binding as in haproxy-e2e.sh), ROUNDS (2), START_CACHE_MAX_BYTES (1048576: the
# most of a server's index copy that may be in the page cache at its start), LB_THREADS (1), BASE_PORT
# (18600), SERVER_THREADS (8), POSTINGS_IO (pread: lists read with pread 16 KiB at a time, as
# Lucene's NIOFSDirectory and so Elasticsearch's default store read postings; mmap: page
# faults on the mapped index, Tantivy's and Lucene's default; `tantivy-engine serve
# --postings-io`), DICTIONARY (page-cache: the term dictionary mapped, in the page cache with
# the postings; ram: read into the process at start; `tantivy-engine serve --dictionary`),
# ANON_HEADROOM_MIB (2: memory above the server's resident set after the warm-up, for its
# growth under load), BALANCER_CONFIG (extra top-level lines for ballot's balancer config,
# `\n`-separated, e.g. `stall_slack = 16`), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BENCH_DIR=${BENCH_DIR:-$ROOT/target/engine-e2e}
RUN_NAME=${RUN_NAME:-$(date +%Y%m%d-%H%M%S)}
DOCS=${DOCS:-1000000}
REPLICAS=${REPLICAS:-8}
CACHE_FRAC=${CACHE_FRAC:-0.05}
SHADOW_EVICTION=${SHADOW_EVICTION:-lru}
FLASH_MBPS=${FLASH_MBPS:-1}
EPS=${EPS:-0.05}
CONCURRENCY=${CONCURRENCY:-16}
WARM_QUERIES=${WARM_QUERIES:-10000}
TEST_QUERIES=${TEST_QUERIES:-8000}
STEADY_QUERIES=${STEADY_QUERIES:-4000}
LOAD=${LOAD:-0.6}
HAPROXY_CONFIGS=${HAPROXY_CONFIGS:-"105 125 150 leastconn"}
ROUNDS=${ROUNDS:-2}
START_CACHE_MAX_BYTES=${START_CACHE_MAX_BYTES:-1048576}
LB_THREADS=${LB_THREADS:-1}
BASE_PORT=${BASE_PORT:-18600}
SERVER_THREADS=${SERVER_THREADS:-8}
POSTINGS_IO=${POSTINGS_IO:-pread}
DICTIONARY=${DICTIONARY:-page-cache}
ANON_HEADROOM_MIB=${ANON_HEADROOM_MIB:-2}
HAPROXY_PORT=$((BASE_PORT + 50))
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
BALLOT_LOAD=auto
PORTS=()
for i in $(seq 0 $((REPLICAS - 1))); do PORTS+=($((BASE_PORT + 1 + i))); done
BALANCE_FACTOR=$(awk -v e="$EPS" 'BEGIN { printf "%d", 100 * (1 + e) + 0.5 }')
stop() { echo "engine-e2e: $*; no result is reported" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# The systems, `haproxy` resolved to its config; an unknown or repeated name stops the run
# (each system's files are named after it).
# shellcheck disable=SC2086 # HAPROXY_CONFIGS is a list of words
SYSTEMS=${SYSTEMS:-"round-robin ch-bl $(haproxy_config_systems $HAPROXY_CONFIGS) ars \
stable-hash prequal cache-aware table"}
resolve_systems "table table-evidence table-late ch-bl round-robin ars stable-hash prequal cache-aware"
[ -n "$SYSTEMS" ] || { echo "SYSTEMS is empty" >&2; exit 2; }
read -ra SYSTEM_LIST <<<"$SYSTEMS"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS=$ROUNDS: need a whole number >= 1" >&2; exit 2; }
[[ $START_CACHE_MAX_BYTES =~ ^[0-9]+$ ]] ||
  { echo "START_CACHE_MAX_BYTES=$START_CACHE_MAX_BYTES: need a number of bytes" >&2; exit 2; }
case $DICTIONARY in
  ram | page-cache) ;;
  *) echo "DICTIONARY=$DICTIONARY: ram or page-cache" >&2; exit 2 ;;
esac
case $POSTINGS_IO in
  pread | mmap) ;;
  *) echo "POSTINGS_IO=$POSTINGS_IO: pread or mmap" >&2; exit 2 ;;
esac

# --- what the machine must provide ------------------------------------------------------
[ "$(id -u)" -eq 0 ] || stop "cgroups need root"
[ -f /sys/fs/cgroup/cgroup.controllers ] &&
  stop "this is cgroup v2 (unified); the script drives v1's memory and blkio controllers"
cg_path() { awk -F: -v c="$1" '$2 == c { print $3 }' /proc/self/cgroup; }
MEMCG=/sys/fs/cgroup/memory$(cg_path memory)
BLKCG=/sys/fs/cgroup/blkio$(cg_path blkio)
BLKCG=${BLKCG%/}
[ -f "$MEMCG/memory.limit_in_bytes" ] || stop "no cgroup v1 memory controller at $MEMCG"
[ -f "$BLKCG/blkio.throttle.read_bps_device" ] || stop "no cgroup v1 blkio throttle at $BLKCG"
# Every system-run starts by dropping the kernel's page cache (drop_page_cache).
[ -w /proc/sys/vm/drop_caches ] ||
  stop "cannot write /proc/sys/vm/drop_caches, so a run could start over a warm page cache"
mkdir -p "$BENCH_DIR"
DEVICE=$(stat -c '%Hd:%Ld' "$BENCH_DIR")
[ -e "/sys/dev/block/$DEVICE" ] ||
  stop "$BENCH_DIR is not on a block device ($DEVICE), so block-IO throttling cannot apply"
# blkio throttles and counts whole disks: a partition's reads are its disk's.
if [ -e "/sys/dev/block/$DEVICE/partition" ]; then
  DEVICE=$(cat "/sys/dev/block/$DEVICE/../dev")
fi
FLASH_BPS=$(awk -v m="$FLASH_MBPS" 'BEGIN { if (m + 0 <= 0) exit 1; printf "%d", m * 1000000 }') ||
  stop "FLASH_MBPS=$FLASH_MBPS is not a positive number of MB/s"
for c in "$MEMCG" "$BLKCG"; do
  mkdir -p "$c/ballot-engine-probe" 2>/dev/null && rmdir "$c/ballot-engine-probe" ||
    stop "cannot create a cgroup under $c"
done
# Any HAProxy config (SYSTEMS holds resolved names only: haproxy-N, haproxy-leastconn).
if [[ " $SYSTEMS " == *" haproxy-"* ]] && ! command -v haproxy >/dev/null; then
  apt-get update && apt-get install -y haproxy
fi
command -v python3 >/dev/null || stop "python3 is needed to read the reports"
command -v fincore >/dev/null || stop "fincore (util-linux) is needed to check that each server starts cold"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p tantivy-engine -p balancer-ops -p pipelines --features pipelines/tantivy
fi
BIN=$ROOT/target/release
for b in balancer tantivy-engine ballot; do
  [ -x "$BIN/$b" ] || stop "missing $BIN/$b"
done
for p in "${PORTS[@]}" "$HAPROXY_PORT" "$BALLOT_PORT" "$BALLOT_ADMIN"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    stop "port $p is already in use; stop its process or set BASE_PORT"
  fi
done

# --- data: the replica index, its Tantivy twin, sizes from Tantivy, table, copies --------
REPLICA_INDEX=$BENCH_DIR/replica-index
if [ ! -f "$REPLICA_INDEX/manifest.json" ] ||
  ! grep -q "\"docs\": $DOCS," "$REPLICA_INDEX/manifest.json"; then
  rm -rf "$REPLICA_INDEX" "$BENCH_DIR/tantivy-index"
  "$BIN/ballot" build-index --docs "$DOCS" -o "$REPLICA_INDEX"
fi
TANTIVY_INDEX=$BENCH_DIR/tantivy-index
if [ ! -f "$TANTIVY_INDEX/meta.json" ]; then
  # Built aside and moved into place: Tantivy writes meta.json before the documents.
  rm -rf "$TANTIVY_INDEX" "$TANTIVY_INDEX.tmp"
  "$BIN/tantivy-engine" index --from "$REPLICA_INDEX" -o "$TANTIVY_INDEX.tmp"
  mv "$TANTIVY_INDEX.tmp" "$TANTIVY_INDEX"
fi
SIZES=$BENCH_DIR/tantivy-sizes.parquet
[ "$SIZES" -nt "$TANTIVY_INDEX/meta.json" ] ||
  "$BIN/ballot" sizes --tantivy "$TANTIVY_INDEX" -o "$SIZES"
TAG="docs$DOCS-r$REPLICAS-f$CACHE_FRAC-e$EPS-$SHADOW_EVICTION"
TABLE=$BENCH_DIR/table-$TAG.parquet
EVAL=$BENCH_DIR/eval-$TAG.json
if [ ! -f "$TABLE" ] || [ "$TABLE" -ot "$SIZES" ]; then
  "$BIN/ballot" train --sizes "$SIZES" --replicas "$REPLICAS" --cache-frac "$CACHE_FRAC" \
    --eviction "$SHADOW_EVICTION" --eps "$EPS" -o "$TABLE" >"$BENCH_DIR/train-$TAG.log" 2>&1 ||
    { tail -20 "$BENCH_DIR/train-$TAG.log" >&2; exit 1; }
fi
if [ ! -f "$EVAL" ] || [ "$EVAL" -ot "$TABLE" ]; then
  "$BIN/ballot" eval --sizes "$SIZES" --replicas "$REPLICAS" --cache-frac "$CACHE_FRAC" \
    --eviction "$SHADOW_EVICTION" --eps "$EPS" --policies round-robin,ch-bl,table \
    --table "$TABLE" --json "$EVAL" >/dev/null
fi
CACHE_BYTES=$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["results"][0]["capacity_bytes"])' "$EVAL")
COPIES=$BENCH_DIR/copies
for i in $(seq 0 $((REPLICAS - 1))); do
  if [ ! -f "$COPIES/r$i/meta.json" ] || [ "$COPIES/r$i/meta.json" -ot "$TANTIVY_INDEX/meta.json" ]; then
    rm -rf "$COPIES/r$i" "$COPIES/r$i.tmp" && mkdir -p "$COPIES"
    cp -r "$TANTIVY_INDEX" "$COPIES/r$i.tmp" && mv "$COPIES/r$i.tmp" "$COPIES/r$i"
  fi
done
sync

RUN=$(mktemp -d)
cleanup() {
  stop_all
  for i in $(seq 0 $((REPLICAS - 1))); do
    rmdir "$MEMCG/ballot-engine-r$i" "$BLKCG/ballot-engine-r$i" 2>/dev/null || true
  done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# drop_page_cache: the kernel drops its clean page cache, all of it. The index copies' pages
# may be cached from an earlier run and charged to a cgroup since removed: a fresh server
# would hit them without its own cgroup counting them. `sync` first, so no page is dirty.
drop_page_cache() {
  sync
  echo 1 >/proc/sys/vm/drop_caches || stop "cannot drop the page cache"
}

# start_servers TAG: one cgroup pair and one server per replica, reads throttled from the
# start, memory not yet limited (see limit_memory).
start_servers() {
  local i pids=()
  for i in $(seq 0 $((REPLICAS - 1))); do
    local mem=$MEMCG/ballot-engine-r$i blk=$BLKCG/ballot-engine-r$i
    rmdir "$mem" "$blk" 2>/dev/null || true
    mkdir -p "$mem" "$blk"
    # No limit until limit_memory, even if a previous system's cgroup survived.
    echo -1 >"$mem/memory.limit_in_bytes"
    echo "$DEVICE $FLASH_BPS" >"$blk/blkio.throttle.read_bps_device"
    sh -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" && shift 2 && exec "$@"' \
      sh "$mem" "$blk" "$BIN/tantivy-engine" serve --index "$COPIES/r$i" \
      --listen "127.0.0.1:${PORTS[$i]}" --threads "$SERVER_THREADS" \
      --postings-io "$POSTINGS_IO" --dictionary "$DICTIONARY" \
      >"$RUN/$1-server$i.log" 2>&1 &
    PIDS+=($!)
    pids+=($!)
  done
  for i in $(seq 0 $((REPLICAS - 1))); do
    wait_line "$RUN/$1-server$i.log" "^listening on" "${pids[$i]}"
  done
}

# limit_memory: after the warm-up (the servers' own memory has grown to what the load
# needs), each memory cgroup's limit becomes its resident anonymous memory +
# ANON_HEADROOM_MIB + CACHE_BYTES; the kernel reclaims the page cache down to it at once.
limit_memory() {
  local i rss
  for i in $(seq 0 $((REPLICAS - 1))); do
    local mem=$MEMCG/ballot-engine-r$i
    rss=$(awk '$1 == "total_rss" { print $2 }' "$mem/memory.stat")
    echo $((rss + ANON_HEADROOM_MIB * 1048576 + CACHE_BYTES)) >"$mem/memory.limit_in_bytes"
  done
}

device_reads() { # one line: each server's bytes read from DEVICE so far
  local i
  for i in $(seq 0 $((REPLICAS - 1))); do
    awk -v d="$DEVICE" '$1 == d && $2 == "Read" { v = $3 } END { print v + 0 }' \
      "$BLKCG/ballot-engine-r$i/blkio.throttle.io_service_bytes"
  done | paste -sd' '
}

memory_stats() { # one line per server: page cache bytes, resident anonymous bytes, limit
  local i
  for i in $(seq 0 $((REPLICAS - 1))); do
    local mem=$MEMCG/ballot-engine-r$i
    awk -v limit="$(cat "$mem/memory.limit_in_bytes")" '
      $1 == "total_cache" { c = $2 } $1 == "total_rss" { r = $2 }
      END { print c, r, limit }' "$mem/memory.stat"
  done
}

# index_cached: one line per server, the bytes of its index copy resident in the page cache
# (util-linux `fincore`). The cgroup's own figure (memory_stats) also counts the pages of the
# server's program, which its start maps in (13.6 MB for one server, measured); the index's
# are what a cold start must not have.
index_cached() {
  local i
  for i in $(seq 0 $((REPLICAS - 1))); do
    fincore -b -n -o RES "$COPIES/r$i"/* | awk '{ s += $1 } END { print s + 0 }'
  done
}

# check_cold FILE: FILE holds index_cached taken right after the servers started; a server
# whose index copy has more than START_CACHE_MAX_BYTES in the page cache stops the run.
check_cold() {
  local i=0 cached
  while read -r cached; do
    [ "${cached:-0}" -le "$START_CACHE_MAX_BYTES" ] ||
      stop "server r$i ($2) started with $cached bytes of its index in the page cache," \
        "more than START_CACHE_MAX_BYTES=$START_CACHE_MAX_BYTES: a fresh server must start cold"
    i=$((i + 1))
  done <"$1"
}

BALLOT_CONFIG_EXTRA='work_source = "shadow"'${BALANCER_CONFIG:+"\n$BALANCER_CONFIG"}
BALLOT_CONFIG_TAIL="[shadow]\ncache_bytes = $CACHE_BYTES\neviction = \"$SHADOW_EVICTION\""
BALLOT_CONFIG_TAIL="$BALLOT_CONFIG_TAIL\n[[routes]]\npreset = \"tantivy\""
OUT=$BENCH_DIR/$RUN_NAME
mkdir -p "$OUT"

# run_system SYSTEM ROUND: one system-run, cold, its files OUT/<what>-SYSTEM-rROUND.*; the
# first run of all sets RATE, the steady phase's offered load for every run.
RATE=""
run_system() {
  local sys=$1 run="$1-r$2" target
  drop_page_cache
  start_servers "$run"
  memory_stats >"$OUT/memory-start-$run.txt"
  index_cached >"$OUT/index-cached-start-$run.txt"
  check_cold "$OUT/index-cached-start-$run.txt" "$sys, round $2"
  if [[ $sys == haproxy-* ]]; then
    start_haproxy "$run" "$sys"
    target="http://127.0.0.1:$HAPROXY_PORT"
  else
    start_ballot "$run" "$sys"
    target="http://127.0.0.1:$BALLOT_PORT"
  fi
  replay "$OUT/warm-$run" --target "$target" --search-path /api/ --part train \
    --queries "$WARM_QUERIES" --concurrency "$CONCURRENCY"
  limit_memory
  if [[ $sys != haproxy-* ]]; then scrape_metrics "$OUT/metrics-before-$run.txt"; fi
  device_reads >"$OUT/device-before-$run.txt"
  replay "$OUT/saturation-$run" --target "$target" --search-path /api/ --part test \
    --queries "$TEST_QUERIES" --concurrency "$CONCURRENCY"
  device_reads >"$OUT/device-after-$run.txt"
  if [[ $sys != haproxy-* ]]; then scrape_metrics "$OUT/metrics-after-$run.txt"; fi
  memory_stats >"$OUT/memory-$run.txt"
  if [ -z "$RATE" ]; then
    RATE=$(python3 -c '
import json, sys
print(round(json.load(open(sys.argv[1]))["throughput_qps"] * float(sys.argv[2]), 1))' \
      "$OUT/saturation-$run.json" "$LOAD")
  fi
  # Test queries the saturation phase did not serve: its caches are warm, its answers not.
  replay "$OUT/steady-$run" --target "$target" --search-path /api/ --part test \
    --skip "$TEST_QUERIES" --queries "$STEADY_QUERIES" --rate "$RATE"
  stop_all
  python3 - "$OUT" "$run" <<'PY'
import json, sys
out, run = sys.argv[1], sys.argv[2]
sat, st = (json.load(open(f"{out}/{p}-{run}.json")) for p in ("saturation", "steady"))
before, after = (list(map(int, open(f"{out}/device-{p}-{run}.txt").read().split()))
                 for p in ("before", "after"))
dev = sum(a - b for a, b in zip(after, before))
cache = max(int(l.split()[0]) for l in open(f"{out}/memory-{run}.txt"))
print(f"{run:<22} {sat['throughput_qps']:.1f} q/s saturated, steady p99 "
      f"{st['latency_ms']['p99']:.1f} ms, {dev} device bytes, largest page cache {cache}, "
      f"errors {sat['error_total'] + st['error_total']}")
PY
}

echo "servers: $REPLICAS x tantivy-engine over copies of $TANTIVY_INDEX" \
  "($(du -sb "$TANTIVY_INDEX" | cut -f1) bytes)"
echo "  page cache $CACHE_BYTES bytes each (+ its own memory), reads from $DEVICE throttled" \
  "to $FLASH_MBPS MB/s each; postings $POSTINGS_IO, dictionary $DICTIONARY"
echo "load: warm-up $WARM_QUERIES, saturation $TEST_QUERIES (closed loop, $CONCURRENCY" \
  "workers), steady the next $STEADY_QUERIES at $LOAD x the first run's rate"
n=${#SYSTEM_LIST[@]}
echo "systems: $SYSTEMS; $ROUNDS round(s), rotated: $((n * ROUNDS)) system-runs, about" \
  "$((n * ROUNDS * 37 / 10)) minutes (about 3.7 minutes each, as measured)"
for k in $(seq 1 "$ROUNDS"); do
  # Round k starts at the k-th system and wraps around.
  for j in $(seq 0 $((n - 1))); do
    run_system "${SYSTEM_LIST[$(((k - 1 + j) % n))]}" "$k"
  done
done

# --- the summary: medians over the rounds, each round kept ---------------------------------
python3 - "$OUT" "$REPLICAS" "$CACHE_BYTES" "$FLASH_MBPS" "$DOCS" "$RATE" "$DEVICE" \
  "$POSTINGS_IO" "$DICTIONARY" "$ROUNDS" "$START_CACHE_MAX_BYTES" "$LOAD" "$TEST_QUERIES" \
  "$STEADY_QUERIES" $SYSTEMS <<'PY'
import json, re, statistics, sys
(out, replicas, cache, mbps, docs, rate, device, postings_io, dictionary, rounds, start_max,
 load, test_queries, steady_queries) = sys.argv[1:15]
systems, rounds = sys.argv[15:], int(rounds)
# Round k's order: SYSTEMS rotated to start at its k-th system.
order = [systems[(k - 1) % len(systems):] + systems[:(k - 1) % len(systems)]
         for k in range(1, rounds + 1)]

def shadow(path):
    acc = {}
    for line in open(path):
        m = re.match(r'ballot_shadow_miss_bytes_total\{replica="([^"]*)"\}\s+(\S+)$', line.strip())
        if m:
            acc[m.group(1)] = float(m.group(2))
    return acc

def column(path, i):
    return [int(l.split()[i]) for l in open(path) if l.strip()]

def one_run(s, k):
    run = f"{s}-r{k}"
    sat, st = (json.load(open(f"{out}/{p}-{run}.json")) for p in ("saturation", "steady"))
    before, after = (list(map(int, open(f"{out}/device-{p}-{run}.txt").read().split()))
                     for p in ("before", "after"))
    per = [a - b for a, b in zip(after, before)]
    dev = sum(per)
    r = {
        "round": k,
        "position": order[k - 1].index(s) + 1,
        "saturation_qps": sat["throughput_qps"],
        "steady_p99_ms": st["latency_ms"]["p99"],
        "steady_qps": st["throughput_qps"],
        "device_read_bytes": dev,
        "device_read_bytes_per_server": per,
        "measured_flash_share_max": max(per) / dev if dev else None,
        "shadow_flash_share_max": None,
        "shadow_miss_bytes": None,
        "start_cache_bytes": column(f"{out}/memory-start-{run}.txt", 0),
        "start_index_cached_bytes": column(f"{out}/index-cached-start-{run}.txt", 0),
        "page_cache_bytes": column(f"{out}/memory-{run}.txt", 0),
        "anon_bytes": column(f"{out}/memory-{run}.txt", 1),
        "errors": sat["error_total"] + st["error_total"],
    }
    if not s.startswith("haproxy-"):
        b, a = shadow(f"{out}/metrics-before-{run}.txt"), shadow(f"{out}/metrics-after-{run}.txt")
        d = [a.get(x, 0) - b.get(x, 0) for x in sorted(a)]
        if sum(d) > 0:
            r["shadow_flash_share_max"] = max(d) / sum(d)
            r["shadow_miss_bytes"] = sum(d)
    return r

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def spread(values):
    values = [v for v in values if v is not None]
    return [min(values), max(values)] if values else None

def per_server(runs, key):
    return [median(r[key][i] for r in runs) for i in range(len(runs[0][key]))]

rows = []
for s in systems:
    runs = [one_run(s, k) for k in range(1, rounds + 1)]
    m = lambda key: median(r[key] for r in runs)
    gaps = [abs(r["shadow_flash_share_max"] - r["measured_flash_share_max"]) for r in runs
            if None not in (r["shadow_flash_share_max"], r["measured_flash_share_max"])]
    rows.append({
        "system": s,
        "saturation_qps": m("saturation_qps"),
        "saturation_qps_spread": spread(r["saturation_qps"] for r in runs),
        "steady_p99_ms": m("steady_p99_ms"),
        "steady_p99_ms_spread": spread(r["steady_p99_ms"] for r in runs),
        "steady_qps": m("steady_qps"),
        "device_read_bytes": m("device_read_bytes"),
        "device_read_bytes_per_server": per_server(runs, "device_read_bytes_per_server"),
        "measured_flash_share_max": m("measured_flash_share_max"),
        "shadow_flash_share_max": m("shadow_flash_share_max"),
        "shadow_miss_bytes": m("shadow_miss_bytes"),
        # Each run's shadow share against its own kernel share, the median over the rounds.
        "shadow_share_gap": median(gaps),
        "start_cache_bytes": per_server(runs, "start_cache_bytes"),
        "start_cache_bytes_max": max(max(r["start_cache_bytes"]) for r in runs),
        "page_cache_bytes": per_server(runs, "page_cache_bytes"),
        "page_cache_bytes_max": median(max(r["page_cache_bytes"]) for r in runs),
        "anon_bytes": per_server(runs, "anon_bytes"),
        "errors": sum(r["errors"] for r in runs),
        "rounds": runs,
    })
setup = {"replicas": int(replicas), "cache_bytes": int(cache), "flash_mbps_per_server": float(mbps),
         "docs": int(docs), "steady_rate_qps": float(rate), "steady_load": float(load),
         "device": device, "postings_io": postings_io, "dictionary": dictionary,
         "rounds": rounds, "order": order, "start_cache_max_bytes": int(start_max),
         "test_queries": int(test_queries), "steady_queries": int(steady_queries),
         "steady_skip": int(test_queries)}
json.dump({"setup": setup, "rows": rows}, open(f"{out}/result.json", "w"), indent=2)
f = lambda v, fmt: "–" if v is None else format(v, fmt)
span = lambda v, fmt: "–" if v is None else f"{v[0]:{fmt}}–{v[1]:{fmt}}"
with open(f"{out}/results.md", "w") as md:
    md.write(f"Medians of {rounds} round(s), min–max beside; steady at {float(rate):.1f} q/s "
             f"offered; postings {postings_io}, dictionary {dictionary}.\n\n")
    md.write("| system | saturation q/s | min–max | steady p99 ms | min–max | device bytes "
             "| busiest share (kernel) | busiest share (shadow) | device / shadow bytes "
             "| max page cache at end MiB | errors |\n"
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        ratio = r["device_read_bytes"] / r["shadow_miss_bytes"] if r["shadow_miss_bytes"] else None
        md.write(f"| {r['system']} | {r['saturation_qps']:.1f} | "
                 f"{span(r['saturation_qps_spread'], '.1f')} | {r['steady_p99_ms']:.1f} | "
                 f"{span(r['steady_p99_ms_spread'], '.1f')} | {r['device_read_bytes']:.0f} | "
                 f"{f(r['measured_flash_share_max'], '.3f')} | "
                 f"{f(r['shadow_flash_share_max'], '.3f')} | {f(ratio, '.2f')} | "
                 f"{r['page_cache_bytes_max'] / 1048576:.1f} | {r['errors']} |\n")
print(open(f"{out}/results.md").read())
print(f"result: {out}/result.json")
PY

# --- the verdict, on the medians ------------------------------------------------------------
python3 - "$OUT/result.json" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
rows = {r["system"]: r for r in result["rows"]}
rounds = result["setup"]["rounds"]
missed, met = [], []
def check(ok, line):
    (met if ok else missed).append(line)
def ratio(a, b):
    return a / b if b else float("inf")

print(f"spread between the {rounds} round(s) (min–max; its width over the median):")
for s, r in rows.items():
    (q0, q1), (p0, p1) = r["saturation_qps_spread"], r["steady_p99_ms_spread"]
    print(f"  {s:<18} q/s {q0:.1f}–{q1:.1f} ({ratio(q1 - q0, r['saturation_qps']):.1%}), "
          f"p99 {p0:.1f}–{p1:.1f} ms ({ratio(p1 - p0, r['steady_p99_ms']):.1%})")

for s, r in rows.items():
    check(r["errors"] == 0, f"{s}: {r['errors']} failed requests over {rounds} round(s), target 0")
t = rows.get("table")
def best(names):
    """The system of names with the highest median saturation queries/s."""
    return max(names, key=lambda s: rows[s]["saturation_qps"]) if names else None
if t and "round-robin" in rows:
    rr = rows["round-robin"]
    q = ratio(t["saturation_qps"], rr["saturation_qps"])
    check(q >= 1.5, f"table / round-robin queries/s {q:.2f}x (medians {t['saturation_qps']:.1f} "
                    f"/ {rr['saturation_qps']:.1f}), target >= 1.5")
    p = ratio(t["steady_p99_ms"], rr["steady_p99_ms"])
    check(p <= 0.5, f"table / round-robin p99 at equal load {p:.2f}x (medians "
                    f"{t['steady_p99_ms']:.1f} / {rr['steady_p99_ms']:.1f} ms), target <= 0.5")
    d = ratio(t["device_read_bytes"], rr["device_read_bytes"])
    check(d <= 0.6, f"table / round-robin device bytes {d:.2f}x (medians "
                    f"{t['device_read_bytes']:.0f} / {rr['device_read_bytes']:.0f}), target <= 0.6")
h = best([s for s in rows if s.startswith("haproxy-")])
if t and h:
    q = ratio(t["saturation_qps"], rows[h]["saturation_qps"])
    check(q >= 1.3, f"table / the best HAProxy config ({h}) queries/s {q:.2f}x (medians "
                    f"{t['saturation_qps']:.1f} / {rows[h]['saturation_qps']:.1f}), target >= 1.3")
b = best([s for s in rows if s not in ("table", "table-evidence", "table-late", "round-robin", "ch-bl")])
if t and b:
    q = ratio(t["saturation_qps"], rows[b]["saturation_qps"])
    check(q >= 1.2, f"table / the best peer ({b}) queries/s {q:.2f}x (medians "
                    f"{t['saturation_qps']:.1f} / {rows[b]['saturation_qps']:.1f}), target >= 1.2")
    p = ratio(t["steady_p99_ms"], rows[b]["steady_p99_ms"])
    check(p <= 0.8, f"table / the best peer ({b}) p99 at equal load {p:.2f}x (medians "
                    f"{t['steady_p99_ms']:.1f} / {rows[b]['steady_p99_ms']:.1f} ms), target <= 0.8")
if t and t["shadow_share_gap"] is not None:
    check(t["shadow_share_gap"] <= 0.03,
          f"table: busiest share, shadow {t['shadow_flash_share_max']:.3f} vs kernel "
          f"{t['measured_flash_share_max']:.3f} (medians; each run's gap, median "
          f"{t['shadow_share_gap']:.3f}), target within 0.03")
for line in met:
    print("target met: " + line)
if missed:
    sys.exit("TARGET MISSED: " + "; ".join(missed))
PY
