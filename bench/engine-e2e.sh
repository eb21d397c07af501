#!/usr/bin/env bash
# ballot in front of a search engine it did not write, measured by the kernel (issue 30).
#
# REPLICAS Tantivy search servers (`tantivy-engine serve`: the tantivy crate, tantivy-cli's
# `GET /api/?q=` API), each over its own copy of one Tantivy index holding the documents of
# `ballot build-index --docs DOCS`. Each server runs in its own cgroup (v1): a memory cgroup
# whose limit, set after the warm-up, leaves it CACHE_BYTES of page cache above what the
# process itself uses (the page cache is its RAM cache; postings are read with pread, or
# through mmap, with read-ahead off; result.json reports the page cache each server had at
# the end), and a block-IO cgroup that throttles its reads from the index's block device to
# FLASH_MBPS (the flash). Nothing of ballot runs inside the servers: they send no miss-bytes header and no
# load report, so ballot's `table` bounds the work its shadow caches estimate
# (`work_source = "shadow"`), with the size table `ballot sizes --tantivy` reads from the
# index's own term dictionary.
#
# Systems, each with fresh servers (cold page caches) and a fresh load balancer: ballot
# `round-robin`, `ch-bl`, `table`, and HAProxy (`balance url_param q`, consistent hashing with
# bounded loads, eps = EPS). For each: warm-up (WARM_QUERIES train queries, closed loop),
# saturation (TEST_QUERIES test queries, closed loop with CONCURRENCY workers: queries/s), then
# steady (the first STEADY_QUERIES test queries again, open loop at LOAD x the first system's
# saturation rate: p99 at equal offered load, over caches the saturation phase warmed). Bytes
# read from the device per server come from the kernel's
# `blkio.throttle.io_service_bytes` over the saturation phase; the shadow caches' estimate
# from ballot's `ballot_shadow_miss_bytes_total` over the same phase.
#
# Writes target/engine-e2e/<RUN_NAME>/result.json: {"setup": {...}, "rows": [one per system:
# system, saturation_qps, steady_p99_ms, device_read_bytes, measured_flash_share_max,
# shadow_flash_share_max, shadow_miss_bytes, page_cache_bytes, errors]} and results.md, and
# exits 1 naming each target missed: table >= 1.5x round-robin's and >= 1.3x HAProxy's
# saturation queries/s, p99 <= 0.5x round-robin's, device bytes <= 0.6x round-robin's, the
# shadow estimate of the busiest server's share within 0.03 of the kernel's, 0 errors.
#
# Needs root (cgroups), cgroup v1 memory and blkio controllers, an index directory on a
# block device, haproxy (installed with apt when missing), python3; about 1.5 GB of disk at
# the default DOCS. Where the machine lacks any of these it says so and stops: an
# unthrottled or unlimited run is never reported.
#
# Knobs (environment): BENCH_DIR (target/engine-e2e), RUN_NAME (date-time), DOCS (1000000),
# REPLICAS (8, as the demo), CACHE_FRAC (0.05: the page cache of each server, as a fraction of the log's
# distinct postings bytes, as the demo's caches), SHADOW_EVICTION (lru: what the shadow caches
# and the table's training assume the kernel does), FLASH_MBPS (1 per server), EPS (0.05),
# CONCURRENCY (16), WARM_QUERIES (10000), TEST_QUERIES (8000), STEADY_QUERIES (4000), LOAD
# (0.8), SYSTEMS ("round-robin ch-bl haproxy table"; the first sets the steady rate),
# LB_THREADS (1), BASE_PORT (18600), SERVER_THREADS (8), POSTINGS_IO (pread: lists read with
# pread 16 KiB at a time, as Lucene's NIOFSDirectory and so Elasticsearch's default store read
# postings; mmap: page faults on the mapped index, Tantivy's and Lucene's default;
# `tantivy-engine serve --postings-io`), ANON_HEADROOM_MIB (2: memory above the server's
# resident set after the warm-up, for its growth under load), BALANCER_CONFIG
# (extra top-level lines for ballot's balancer config, `\n`-separated, e.g. `stall_slack = 16`),
# SKIP_BUILD=1.
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
LOAD=${LOAD:-0.8}
SYSTEMS=${SYSTEMS:-"round-robin ch-bl haproxy table"}
LB_THREADS=${LB_THREADS:-1}
BASE_PORT=${BASE_PORT:-18600}
SERVER_THREADS=${SERVER_THREADS:-8}
POSTINGS_IO=${POSTINGS_IO:-pread}
ANON_HEADROOM_MIB=${ANON_HEADROOM_MIB:-2}
HAPROXY_PORT=$((BASE_PORT + 50))
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
BALLOT_LOAD=auto
PORTS=()
for i in $(seq 0 $((REPLICAS - 1))); do PORTS+=($((BASE_PORT + 1 + i))); done
BALANCE_FACTOR=$(awk -v e="$EPS" 'BEGIN { printf "%d", 100 * (1 + e) + 0.5 }')
stop() { echo "engine-e2e: $*; no result is reported" >&2; exit 1; }

for s in $SYSTEMS; do
  case $s in
    table | ch-bl | haproxy | round-robin) ;;
    *) echo "SYSTEMS: unknown system '$s' (table, ch-bl, haproxy, round-robin)" >&2; exit 2 ;;
  esac
done

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
if [[ " $SYSTEMS " == *" haproxy "* ]] && ! command -v haproxy >/dev/null; then
  apt-get update && apt-get install -y haproxy
fi
command -v python3 >/dev/null || stop "python3 is needed to read the reports"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p tantivy-engine -p balancer-server -p pipelines --features pipelines/tantivy
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
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
cleanup() {
  stop_all
  for i in $(seq 0 $((REPLICAS - 1))); do
    rmdir "$MEMCG/ballot-engine-r$i" "$BLKCG/ballot-engine-r$i" 2>/dev/null || true
  done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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
      --listen "127.0.0.1:${PORTS[$i]}" --threads "$SERVER_THREADS" --postings-io "$POSTINGS_IO" \
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

BALLOT_CONFIG_EXTRA='work_source = "shadow"'${BALANCER_CONFIG:+"\n$BALANCER_CONFIG"}
BALLOT_CONFIG_TAIL="[shadow]\ncache_bytes = $CACHE_BYTES\neviction = \"$SHADOW_EVICTION\"\n[[routes]]\npreset = \"tantivy\""
OUT=$BENCH_DIR/$RUN_NAME
mkdir -p "$OUT"
echo "servers: $REPLICAS x tantivy-engine over copies of $TANTIVY_INDEX ($(du -sb "$TANTIVY_INDEX" | cut -f1) bytes)"
echo "  page cache $CACHE_BYTES bytes each (+ its own memory), reads from $DEVICE throttled to $FLASH_MBPS MB/s each"
echo "load: warm-up $WARM_QUERIES, saturation $TEST_QUERIES (closed loop, $CONCURRENCY workers), steady $STEADY_QUERIES at $LOAD x the first system's rate"
RATE=""
for sys in $SYSTEMS; do
  start_servers "$sys"
  if [ "$sys" = haproxy ]; then
    start_haproxy "$sys"
    target="http://127.0.0.1:$HAPROXY_PORT"
  else
    start_ballot "$sys" "$sys"
    target="http://127.0.0.1:$BALLOT_PORT"
  fi
  replay "$OUT/warm-$sys" --target "$target" --search-path /api/ --part train \
    --queries "$WARM_QUERIES" --concurrency "$CONCURRENCY"
  limit_memory
  if [ "$sys" != haproxy ]; then scrape_metrics "$OUT/metrics-before-$sys.txt"; fi
  device_reads >"$OUT/device-before-$sys.txt"
  replay "$OUT/saturation-$sys" --target "$target" --search-path /api/ --part test \
    --queries "$TEST_QUERIES" --concurrency "$CONCURRENCY"
  device_reads >"$OUT/device-after-$sys.txt"
  if [ "$sys" != haproxy ]; then scrape_metrics "$OUT/metrics-after-$sys.txt"; fi
  memory_stats >"$OUT/memory-$sys.txt"
  if [ -z "$RATE" ]; then
    RATE=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["throughput_qps"] * float(sys.argv[2]), 1))' \
      "$OUT/saturation-$sys.json" "$LOAD")
  fi
  replay "$OUT/steady-$sys" --target "$target" --search-path /api/ --part test \
    --queries "$STEADY_QUERIES" --rate "$RATE"
  stop_all
  python3 - "$OUT" "$sys" <<'PY'
import json, sys
out, s = sys.argv[1], sys.argv[2]
sat, st = (json.load(open(f"{out}/{p}-{s}.json")) for p in ("saturation", "steady"))
before, after = (list(map(int, open(f"{out}/device-{p}-{s}.txt").read().split())) for p in ("before", "after"))
dev = sum(a - b for a, b in zip(after, before))
print(f"{s:<12} {sat['throughput_qps']:.1f} q/s saturated, steady p99 {st['latency_ms']['p99']:.1f} ms, "
      f"{dev} device bytes, errors {sat['error_total'] + st['error_total']}")
PY
done

python3 - "$OUT" "$REPLICAS" "$CACHE_BYTES" "$FLASH_MBPS" "$DOCS" "$RATE" "$DEVICE" "$POSTINGS_IO" $SYSTEMS <<'PY'
import json, re, sys
out, replicas, cache, mbps, docs, rate, device, postings_io = sys.argv[1:9]
systems = sys.argv[9:]
def shadow(path):
    acc = {}
    for line in open(path):
        m = re.match(r'ballot_shadow_miss_bytes_total\{replica="([^"]*)"\}\s+(\S+)$', line.strip())
        if m:
            acc[m.group(1)] = float(m.group(2))
    return acc
rows = []
for s in systems:
    sat, st = (json.load(open(f"{out}/{p}-{s}.json")) for p in ("saturation", "steady"))
    before, after = (list(map(int, open(f"{out}/device-{p}-{s}.txt").read().split())) for p in ("before", "after"))
    per = [a - b for a, b in zip(after, before)]
    dev = sum(per)
    row = {
        "system": s,
        "saturation_qps": sat["throughput_qps"],
        "steady_p99_ms": st["latency_ms"]["p99"],
        "steady_qps": st["throughput_qps"],
        "device_read_bytes": dev,
        "device_read_bytes_per_server": per,
        "measured_flash_share_max": max(per) / dev if dev else None,
        "shadow_flash_share_max": None,
        "shadow_miss_bytes": None,
        "page_cache_bytes": [int(l.split()[0]) for l in open(f"{out}/memory-{s}.txt")],
        "anon_bytes": [int(l.split()[1]) for l in open(f"{out}/memory-{s}.txt")],
        "errors": sat["error_total"] + st["error_total"],
    }
    if s != "haproxy":
        b, a = shadow(f"{out}/metrics-before-{s}.txt"), shadow(f"{out}/metrics-after-{s}.txt")
        d = [a.get(k, 0) - b.get(k, 0) for k in sorted(a)]
        if sum(d) > 0:
            row["shadow_flash_share_max"] = max(d) / sum(d)
            row["shadow_miss_bytes"] = sum(d)
    rows.append(row)
setup = {"replicas": int(replicas), "cache_bytes": int(cache), "flash_mbps_per_server": float(mbps),
         "docs": int(docs), "steady_rate_qps": float(rate), "device": device,
         "postings_io": postings_io}
json.dump({"setup": setup, "rows": rows}, open(f"{out}/result.json", "w"), indent=2)
f = lambda v, fmt: "–" if v is None else format(v, fmt)
with open(f"{out}/results.md", "w") as md:
    md.write("| system | saturation q/s | steady p99 ms | device bytes | busiest share (kernel) "
             "| busiest share (shadow) | device / shadow bytes | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        ratio = r["device_read_bytes"] / r["shadow_miss_bytes"] if r["shadow_miss_bytes"] else None
        md.write(f"| {r['system']} | {r['saturation_qps']:.1f} | {r['steady_p99_ms']:.1f} | "
                 f"{r['device_read_bytes']} | {f(r['measured_flash_share_max'], '.3f')} | "
                 f"{f(r['shadow_flash_share_max'], '.3f')} | {f(ratio, '.2f')} | {r['errors']} |\n")
print(open(f"{out}/results.md").read())
print(f"result: {out}/result.json")
PY

# --- the verdict --------------------------------------------------------------------------
python3 - "$OUT/result.json" <<'PY'
import json, sys
rows = {r["system"]: r for r in json.load(open(sys.argv[1]))["rows"]}
missed, met = [], []
def check(ok, line):
    (met if ok else missed).append(line)
for s, r in rows.items():
    check(r["errors"] == 0, f"{s}: {r['errors']} failed requests, target 0")
t = rows.get("table")
if t and "round-robin" in rows:
    rr = rows["round-robin"]
    q = t["saturation_qps"] / rr["saturation_qps"]
    check(q >= 1.5, f"table / round-robin queries/s {q:.2f}x ({t['saturation_qps']:.1f} / {rr['saturation_qps']:.1f}), target >= 1.5")
    p = t["steady_p99_ms"] / rr["steady_p99_ms"]
    check(p <= 0.5, f"table / round-robin p99 at equal load {p:.2f}x ({t['steady_p99_ms']:.1f} / {rr['steady_p99_ms']:.1f} ms), target <= 0.5")
    d = t["device_read_bytes"] / rr["device_read_bytes"]
    check(d <= 0.6, f"table / round-robin device bytes {d:.2f}x ({t['device_read_bytes']} / {rr['device_read_bytes']}), target <= 0.6")
if t and "haproxy" in rows:
    h = rows["haproxy"]
    q = t["saturation_qps"] / h["saturation_qps"]
    check(q >= 1.3, f"table / HAProxy queries/s {q:.2f}x ({t['saturation_qps']:.1f} / {h['saturation_qps']:.1f}), target >= 1.3")
if t and t["shadow_flash_share_max"] is not None:
    gap = abs(t["shadow_flash_share_max"] - t["measured_flash_share_max"])
    check(gap <= 0.03, f"table: busiest share shadow {t['shadow_flash_share_max']:.3f} vs kernel {t['measured_flash_share_max']:.3f}, target within 0.03")
for line in met:
    print("target met: " + line)
if missed:
    sys.exit("TARGET MISSED: " + "; ".join(missed))
PY
