#!/usr/bin/env bash
# Two (or more) voting tables served live, each in turn, on the same replicas and the same
# queries of a partitioned log: which one serves more? This is the live check of a `ballot
# retrain` decision (docs/operations.md, "Retraining on a schedule").
#
# For each round and each table, in an order rotated by round: REPLICAS fresh `replica` processes (cold caches) over one
# index built from the days read, a fresh `balancer` serving the table (load `work`, as
# retrain simulates a table), then
#   1. warm-up: `ballot replay` of the days WARM_FROM..WARM_TO, closed loop, not measured;
#   2. measurement: `ballot replay` of MEASURE_FROM..TEST_DAY, closed loop with CONCURRENCY workers
#      (throughput at saturation), the replicas' /stats deltas giving the flash bytes each
#      replica read (`--stats-from`);
#   3. everything stopped.
# Then one Markdown table: per table and round, throughput (ok answers/s), p99, the
# busiest replica's flash bytes per query (its flash bytes over all the queries), all
# replicas' flash bytes per query, the busiest replica's share, errors; and per table the median
# throughput and busiest flash bytes per query over the rounds, the throughput's spread and
# both as ratios to the first table. Also written to BENCH_DIR/results.md.
#
# Switch mode (SWITCH_TO set): the live check of a table switch. TABLES names the served
# table only; each round runs, in an order rotated by round, one cluster per table of
# SWITCH_TO and one more that never switches ("none"): fresh replicas and balancer serving
# the served table, warm-up as above, then MEASURE_FROM..TEST_DAY replayed closed loop with
# `--interval INTERVAL`, the candidate posted to the balancer's `POST /admin/table` (it ramps
# in over the balancer's `ramp_queries`) SWITCH_AFTER seconds into it, and every replica's
# /stats read each second. Then one table of every interval: each run's throughput (ok/s)
# and measured miss bytes ratio, medians over the rounds (each run's last, partial interval
# left out), and per candidate its lowest and mean interval throughput over TRANSITION
# seconds from the switch relative to the run without a switch (the dip).
#
# Scale mode (SCALE_TO set): replicas join and leave a cluster serving a table over virtual
# homes (`ballot train --virtual-homes`). Each round runs, in an order rotated by round, a
# cluster that never changes ("none", REPLICAS replicas), one that scales ("scale": SCALE_TO -
# REPLICAS more replicas, started cold with the others, join through `POST /admin/replicas`
# SCALE_AFTER seconds into the measured replay, and with SCALE_BACK_AFTER set leave through
# `DELETE /admin/replicas/NAME` then) and, with SCALE_TABLE set, one of SCALE_TO replicas
# serving SCALE_TABLE (a table trained for SCALE_TO: the reference for miss bytes, "static").
# The same interval table as the switch mode, then: the scaled cluster's throughput in the
# last interval of its first minute on SCALE_TO replicas and over the rest of that phase
# against the unchanged cluster's over the phase before the event, its miss bytes against the
# static cluster's over the same intervals, and after the return its throughput against the
# unchanged cluster's.
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
# target/release), MEASURE_FROM (TEST_DAY: the first measured day); switch mode: SWITCH_TO
# (candidate tables), SWITCH_AFTER (15 seconds), INTERVAL (5 seconds), TRANSITION (30 seconds: the window after
# the switch the dip is taken over); scale mode: SCALE_TO (the replica count the cluster grows
# or shrinks to), SCALE_AFTER (60 seconds), SCALE_BACK_AFTER (unset: no return), SCALE_TABLE;
# RAMP_QUERIES (unset: the balancer's default ramp_queries).
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
SWITCH_TO=${SWITCH_TO:-}
MEASURE_FROM=${MEASURE_FROM:-$TEST_DAY}
SWITCH_AFTER=${SWITCH_AFTER:-15}
SCALE_TO=${SCALE_TO:-}
SCALE_AFTER=${SCALE_AFTER:-60}
SCALE_BACK_AFTER=${SCALE_BACK_AFTER:-}
SCALE_TABLE=${SCALE_TABLE:-}
INTERVAL=${INTERVAL:-5}
TRANSITION=${TRANSITION:-30}
BENCH_DIR=${BENCH_DIR:-$ROOT/target/bench-tables}
BASE_PORT=${BASE_PORT:-18600}
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
# Every replica process a run may use: REPLICAS, or SCALE_TO if more.
STARTED=$REPLICAS
if [ -n "$SCALE_TO" ] && [ "$SCALE_TO" -gt "$REPLICAS" ]; then STARTED=$SCALE_TO; fi
PORTS=()
for i in $(seq 0 $((STARTED - 1))); do PORTS+=($((BASE_PORT + i))); done
for t in $TABLES $SWITCH_TO $SCALE_TABLE; do [ -f "$t" ] || { echo "no table $t" >&2; exit 2; }; done
if [ -n "$SWITCH_TO$SCALE_TO" ] && [ "$(echo $TABLES | wc -w)" -ne 1 ]; then
  echo "with SWITCH_TO or SCALE_TO, TABLES names the served table only" >&2
  exit 2
fi
if [ -n "$SWITCH_TO" ] && [ -n "$SCALE_TO" ]; then
  echo "SWITCH_TO and SCALE_TO are separate runs" >&2
  exit 2
fi
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


start_cluster() { # tag table [listed]: STARTED replicas, the first LISTED (REPLICAS) in the config
  local i listed=${3:-$REPLICAS}
  REPLICAS=$STARTED start_replicas "$1"
  {
    echo "listen = \"127.0.0.1:$BALLOT_PORT\""
    echo "admin_listen = \"127.0.0.1:$BALLOT_ADMIN\""
    echo "admin_token = \"bench\""
    echo "eps = $EPS"
    echo "load = \"work\""
    echo "request_timeout_ms = 30000"
    [ -n "${RAMP_QUERIES:-}" ] && echo "ramp_queries = $RAMP_QUERIES"
    echo "[policy]"
    echo "name = \"table\""
    echo "table = \"$2\""
    echo "sizes = \"$INDEX/sizes.parquet\""
    for i in $(seq 0 $((listed - 1))); do
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
echo "warm-up: $WARM_FROM..$WARM_TO; measured: $MEASURE_FROM..$TEST_DAY, closed loop, $CONCURRENCY workers; $ROUNDS round(s)"
if [ -n "$SWITCH_TO$SCALE_TO" ]; then
  # --- switch and scale modes -------------------------------------------------------------
  SERVED=$TABLES
  if [ -n "$SWITCH_TO" ]; then
    TARGETS=(none $SWITCH_TO)
    echo "switch: served $SERVED, the candidate posted after ${SWITCH_AFTER}s"
  else
    TARGETS=(none scale)
    [ -n "$SCALE_TABLE" ] && TARGETS+=(static)
    echo "scale: served $SERVED on $REPLICAS replicas, $SCALE_TO after ${SCALE_AFTER}s${SCALE_BACK_AFTER:+, $REPLICAS again after ${SCALE_BACK_AFTER}s}"
  fi
  admin() { # method path [body]: one admin call, its status code on stdout
    curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer bench" \
      ${3:+-H 'Content-Type: application/json' --data "$3"} "http://127.0.0.1:$BALLOT_ADMIN$2"
  }
  scale() { # out replicas: the cluster to that many replicas, each call's status on one line
    local i codes=""
    if [ "$2" -gt "$REPLICAS" ]; then
      for i in $(seq "$REPLICAS" $(($2 - 1))); do
        codes+="$(admin POST /admin/replicas "{\"name\": \"r$i\", \"address\": \"127.0.0.1:${PORTS[$i]}\"}"),"
      done
    else
      for i in $(seq "$2" $((SCALE_TO - 1))); do
        codes+="$(admin DELETE "/admin/replicas/r$i"),"
      done
    fi
    echo "$(date +%s.%N) $2 ${codes%,}" >>"$1"
  }
  poll_stats() { # out: every replica's /stats each second, one JSON line per reading
    python3 - "$1" "${PORTS[@]}" <<'PY' &
import json, sys, time, urllib.request
out, ports = sys.argv[1], sys.argv[2:]
with open(out, "w") as f:
    while True:
        t = time.time()
        try:
            row = {"t": t, "replicas": []}
            for p in ports:
                with urllib.request.urlopen(f"http://127.0.0.1:{p}/stats", timeout=5) as r:
                    row["replicas"].append(json.load(r))
            f.write(json.dumps(row) + "\n")
            f.flush()
        except (OSError, ValueError):
            pass  # a slow or stopping replica: this second has no reading
        time.sleep(max(0.0, 1.0 - (time.time() - t)))
PY
    PIDS+=($!)
  }
  RUNS=()
  for round in $(seq 1 "$ROUNDS"); do
    n=${#TARGETS[@]}
    for k in $(seq 0 $((n - 1))); do
      target=${TARGETS[$(((k + round - 1) % n))]}
      tag="s$(((k + round - 1) % n))-$round"
      RUNS+=("$tag=$target")
      case $target in
        static) start_cluster "$tag" "$SCALE_TABLE" "$SCALE_TO" ;;
        *) start_cluster "$tag" "$SERVED" ;;
      esac
      replay_log "$OUT/warm-$tag" --from "$WARM_FROM" --to "$WARM_TO" --concurrency "$CONCURRENCY"
      poll_stats "$OUT/stats-$tag.jsonl"
      date +%s.%N >"$OUT/start-$tag"
      if [ "$target" = scale ]; then
        (
          sleep "$SCALE_AFTER"
          scale "$OUT/scale-$tag" "$SCALE_TO"
          if [ -n "$SCALE_BACK_AFTER" ]; then
            sleep $((SCALE_BACK_AFTER - SCALE_AFTER))
            scale "$OUT/scale-$tag" "$REPLICAS"
          fi
        ) &
        PIDS+=($!)
      elif [ "$target" != none ] && [ "$target" != static ]; then
        (
          sleep "$SWITCH_AFTER"
          date +%s.%N >"$OUT/switch-$tag"
          curl -s -o "$OUT/switch-$tag.json" -w '%{http_code}\n' -X POST \
            -H "Authorization: Bearer bench" -H 'Content-Type: application/octet-stream' \
            --data-binary "@$target" "http://127.0.0.1:$BALLOT_ADMIN/admin/table" >>"$OUT/switch-$tag"
        ) &
        PIDS+=($!)
      fi
      replay_log "$OUT/test-$tag" --from "$MEASURE_FROM" --to "$TEST_DAY" \
        --concurrency "$CONCURRENCY" --interval "${INTERVAL}s"
      stop_all
      echo "  $tag ($target): $(grep -m1 -E 'throughput|ok/s|q/s' "$OUT/test-$tag.txt" || true)"
    done
  done
  python3 - "$OUT" "$INTERVAL" "$SWITCH_AFTER" "$TRANSITION" "$REPLICAS" "${RUNS[@]}" <<'PY' | tee "$OUT/results.md"
import json, statistics, sys
out, interval, after, transition = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
replicas = int(sys.argv[5])
runs = [r.split("=", 1) for r in sys.argv[6:]]
NAN = float("nan")
def series(tag):
    rep = json.load(open(f"{out}/test-{tag}.json"))
    start = rep["started_unix_ms"] / 1000  # the replay's clock: its intervals count from here
    ok = {round(iv["start_s"] / interval): iv["ok"] / interval for iv in rep["intervals"] or []}
    if ok:
        last = max(ok)
        ok.pop(last)  # the last interval is partial: the replay drains
        ok = {i: ok.get(i, 0.0) for i in range(last)}  # an interval nothing was sent in served 0
    reads = []
    for line in open(f"{out}/stats-{tag}.jsonl"):
        try:
            reads.append(json.loads(line))
        except ValueError:
            pass  # the poller was stopped mid-line
    def at(t):  # cumulative (miss, requested) bytes over the replicas at the last reading <= t
        best = None
        for r in reads:
            if r["t"] <= t:
                best = r
        if best is None:
            return None
        rs = best["replicas"]
        return (sum(x["miss_bytes"] for x in rs), sum(x["miss_bytes"] + x["hit_bytes"] for x in rs))
    miss = {}
    for i in ok:
        a, b = at(start + i * interval), at(start + (i + 1) * interval)
        miss[i] = (b[0] - a[0]) / (b[1] - a[1]) if a and b and b[1] > a[1] else NAN
    switched = None
    try:
        when, code = open(f"{out}/switch-{tag}").read().split()[:2]
        switched = (float(when) - start, code)
    except (FileNotFoundError, ValueError):
        pass
    events = []  # scale mode: (seconds into the replay, replicas after, status codes)
    try:
        for line in open(f"{out}/scale-{tag}"):
            when, n, codes = line.split()
            events.append((float(when) - start, int(n), codes.split(",")))
    except FileNotFoundError:
        pass
    return ok, miss, sum(rep["errors"].values()), switched, rep["throughput_qps"], events
by = {}
for tag, target in runs:
    by.setdefault(target, []).append(series(tag))
targets = list(by)
lasts = [max(s[0]) + 1 for runs_ in by.values() for s in runs_ if s[0]]
# Switch mode: the intervals every run reached. Scale mode: every interval some run reached
# (the static cluster ends first); a run that ended shows nan there, left out of the means.
last = (max(lasts) if "scale" in by else min(lasts)) if lasts else 0
def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN
def column(t, k):
    return [med([s[k].get(i, NAN) for s in by[t]]) for i in range(last)]
print()
print("| from s | " + " | ".join(f"{t} ok/s | {t} miss bytes" for t in targets) + " |")
print("|---:|" + "---:|---:|" * len(targets))
cols = {t: (column(t, 0), column(t, 1)) for t in targets}
for i in range(last):
    cells = [f"{cols[t][0][i]:.1f} | {cols[t][1][i]:.4f}" for t in targets]
    print(f"| {i * interval:.0f} | " + " | ".join(cells) + " |")
print()
base = cols["none"][0]
def mean_over(col, lo, hi):  # the mean of the intervals that start in [lo, hi) seconds
    xs = [col[i] for i in range(last) if lo <= i * interval < hi and col[i] == col[i]]
    return statistics.mean(xs) if xs else NAN
if "scale" in by:
    evs = [s[5] for s in by["scale"]]
    print(f"scale events (seconds, replicas after, status codes) per run: {evs}")
    if all(len(e) >= 1 for e in evs):
        up = med([e[0][0] for e in evs])
        down = med([e[1][0] for e in evs if len(e) > 1]) if all(len(e) > 1 for e in evs) else last * interval
        sc, st = cols["scale"], cols.get("static")
        before = mean_over(base, 0, up)
        print(f"before the event: unchanged {before:.1f} ok/s, scaled {mean_over(sc[0], 0, up):.1f} ok/s")
        first = mean_over(sc[0], up + 60 - interval, up + 60)
        print(f"the last interval of the first minute after it: {first:.1f} ok/s, "
              f"{first / before:.3f}x the unchanged cluster before it")
        phase = mean_over(sc[0], up + 60, down)
        print(f"from a minute after it to the return: {phase:.1f} ok/s, {phase / before:.3f}x; "
              f"unchanged cluster {mean_over(base, up + 60, down):.1f} ok/s")
        if st:
            m_sc, m_st = mean_over(sc[1], up + 60, down), mean_over(st[1], up + 60, down)
            print(f"miss bytes over the same intervals: scaled {m_sc:.4f}, static {m_st:.4f} "
                  f"({m_sc / m_st:.3f}x); static {mean_over(st[0], up + 60, down):.1f} ok/s")
        if all(len(e) > 1 for e in evs):
            after_back = mean_over(sc[0], down + 60, last * interval)
            same = mean_over(base, down + 60, last * interval)
            print(f"a minute after the return to {replicas}: {after_back:.1f} ok/s, unchanged "
                  f"cluster {same:.1f} ok/s ({after_back / same:.3f}x)")
for t in targets:
    runs_ = by[t]
    line = (f"{t}: {' and '.join(f'{s[4]:.1f}' for s in runs_)} ok/s over the whole replay, "
            f"{sum(s[2] for s in runs_)} errors")
    sw = [s[3] for s in runs_ if s[3]]
    if t not in ("none", "scale", "static"):
        failed = [x for x in sw if x[1] != "200"]
        if len(sw) < len(runs_) or failed:
            line += f"; NOT SWITCHED in {len(runs_) - len(sw) + len(failed)} run(s): {sw}"
        elif sw:
            at_s = med([x[0] for x in sw])  # the measured switch times, on the replay's clock
            # the intervals mostly after the switch and inside the transition
            window = range(round(at_s / interval), min(last, round((at_s + transition) / interval)))
            rel = [cols[t][0][i] / base[i] for i in window if base[i] > 0]
            miss = [m for m in (cols[t][1][i] for i in window) if m == m]
            held = [m for m in (cols["none"][1][i] for i in window) if m == m]
            line += f"; switched at {', '.join(f'{x[0]:.1f}s' for x in sw)}"
            if rel:
                line += (f"; over the {transition:.0f}s from the switch, the lowest interval "
                         f"{min(rel):.3f}x the run without a switch, the mean {statistics.mean(rel):.3f}x")
            if miss and held:
                line += f", miss bytes up to {max(miss):.4f} (without a switch up to {max(held):.4f})"
    print(line)
PY
  exit 0
fi

NAMES=()
read -r -d '' -a LIST <<<"$TABLES" || true  # every table, on one line or several
for round in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((${#LIST[@]} - 1))); do
    n=$(((k + round - 1) % ${#LIST[@]}))  # the order rotated by round: no table always first
    table=${LIST[$n]}
    tag="t$((n + 1))-$round"
    NAMES+=("$tag=$table")
    start_cluster "$tag" "$table"
    replay_log "$OUT/warm-$tag" --from "$WARM_FROM" --to "$WARM_TO" --concurrency "$CONCURRENCY"
    replay_log "$OUT/test-$tag" --from "$MEASURE_FROM" --to "$TEST_DAY" --concurrency "$CONCURRENCY" \
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
by_table, busiest = {}, {}
for tag, path in names:
    r = json.load(open(f"{out}/test-{tag}.json"))
    s = r["stats"]
    q = max(r["ok"], 1)
    flash = [x["delta"]["flash_bytes"] for x in s["replicas"]]
    errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
    by_table.setdefault(path, []).append(r["throughput_qps"])
    busiest.setdefault(path, []).append(max(flash) / q)
    print(f"| {path} | {tag.split('-')[1]} | {r['throughput_qps']:.1f} | {r['latency_ms']['p99']:.1f} | "
          f"{max(flash) / q:.0f} | {sum(flash) / q:.0f} | {max(flash) / max(sum(flash), 1):.3f} | "
          f"{s['miss_bytes_ratio']:.4f} | {errs} |")
print()
med = {p: statistics.median(v) for p, v in by_table.items()}
busy = {p: statistics.median(v) for p, v in busiest.items()}
first = next(iter(med))
for p, m in med.items():
    v = by_table[p]
    print(f"median throughput {p}: {m:.1f} ok/s ({m / med[first]:.3f}x the first; "
          f"rounds {min(v):.1f}..{max(v):.1f}, spread {(max(v) - min(v)) / m:.3f}), "
          f"busiest replica {busy[p]:.0f} flash bytes/query ({busy[p] / busy[first]:.3f}x the first)")
PY
