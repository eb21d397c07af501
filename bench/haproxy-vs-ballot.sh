#!/usr/bin/env bash
# HAProxy vs ballot, side by side, in front of the same three `replica` processes.
#
# HAProxy routes with `balance url_param q` + `hash-type consistent` +
# `hash-balance-factor 105` (consistent hashing of the whole query with bounded loads,
# eps = 0.05: `haproxy-105`, the default); HAPROXY_CONFIGS adds other settings, each its own
# HAProxy process and row (`haproxy-N`: hash-balance-factor N; `haproxy-leastconn`: `balance
# leastconn`). ballot routes with term voting (`term-vote`, or `table` when BENCH_TABLE
# names a voting table) under the same bound. The same wrk load (Zipf-like queries over the
# synthetic log's vocabulary) runs against each, alternately, on loopback; the script prints
# requests/s and p99 latency of every run, and the CPU time (user + system) the balancer
# process used per request.
#
# Not part of CI. Needs root (or sudo) for apt when haproxy or wrk is missing, about 2.1 GB
# of disk for the index (kept in BENCH_DIR and reused), and a few minutes.
#
# Knobs (environment): HAPROXY_CONFIGS ("105"; e.g. "105 125 150 leastconn": one HAProxy per
# config, on ports 18310 on, at most 9; `haproxy` is haproxy-105; ballot is compared with
# each, so the targets hold against HAProxy at its best on each measure),
# BENCH_DIR (default target/bench-haproxy), ROUNDS (2), DURATION (15s
# per measured run), WARMUP (5s, discarded, before each run), CONNS (16), THREADS (2),
# CACHE_BYTES per replica (5% of the index), FLASH_MBPS (400, emulated per replica),
# FLASH_US (100 us per read), VOCAB (20000 most frequent words drawn from), BENCH_TABLE
# (a table.parquet for 3 replicas; default: term-vote), BACKENDS (replica, or static: three
# HAProxy frontends that answer 200 at once, to measure the balancers' own overhead; static
# needs no index, only the log's sizes), LB_THREADS (2: HAProxy's nbthread and ballot's
# --workers), BALLOT_ARGS (extra balancer flags; default --workers $LB_THREADS), BALLOT_LOAD
# (window, or in-flight: ballot's `load` setting), HAPROXY_EXTRA (lines added to HAProxy's
# backend section, `\n`-separated: e.g. the response headers ballot adds, to compare equal
# work), BALLOT_CONFIG_EXTRA (top-level lines added to ballot's config, `\n`-separated:
# e.g. `routing_headers = true`), STATUS_PAGE=1 (ballot's status page fetched every
# STATUS_EVERY seconds, default 1, while ballot is measured: its cost on the request path;
# STATUS_PATH=/healthz fetches a trivial page instead, the fetching client's own cost), HOLD (seconds: start everything, print the ports and process ids, measure nothing,
# and stop after HOLD seconds; for profiling with perf or strace), SKIP_BUILD=1
# (use the binaries already in BIN_DIR), BIN_DIR (target/release), TARGET_RPS (0.95) and
# TARGET_P99 (1.20): the targets ballot / HAProxy must meet on the median of the rounds
# (requests/s at least, p99 at most), against every HAProxy config; the script exits 1
# naming each one missed.
#
# Besides each balancer's CPU per request, the table shows wrk's (from /usr/bin/time, when
# installed): the client's share of the two cores moves with what the balancer sends back.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BENCH_DIR=${BENCH_DIR:-$ROOT/target/bench-haproxy}
TARGET_RPS=${TARGET_RPS:-0.95}
TARGET_P99=${TARGET_P99:-1.20}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-5s}
CONNS=${CONNS:-16}
THREADS=${THREADS:-2}
FLASH_MBPS=${FLASH_MBPS:-400}
FLASH_US=${FLASH_US:-100}
PORTS=(18301 18302 18303)
HAPROXY_PORT=18310 # the first HAProxy config's; the j-th (from 0) listens on HAPROXY_PORT + j
BALLOT_PORT=18320
BALLOT_ADMIN=18321

# The HAProxy configs, named as bench/lib.sh's HAProxy systems: haproxy-N (balance url_param
# q, consistent hashing, hash-balance-factor N > 100) or haproxy-leastconn; a bare N or
# `leastconn` stands for haproxy-N or haproxy-leastconn, `haproxy` for haproxy-105.
HAPROXY_CONFIGS=${HAPROXY_CONFIGS:-105}
HAPROXY_SYSTEMS=()
for c in $HAPROXY_CONFIGS; do
  case $c in
    haproxy) c=haproxy-105 ;;
    haproxy-*) ;;
    *) c=haproxy-$c ;;
  esac
  f=${c#haproxy-}
  if [ "$f" != leastconn ] && ! { [[ $f =~ ^[1-9][0-9]*$ ]] && [ "$f" -gt 100 ]; }; then
    echo "HAPROXY_CONFIGS: unknown config '$c' (haproxy-N with N > 100, haproxy-leastconn)" >&2
    exit 2
  fi
  if [[ " ${HAPROXY_SYSTEMS[*]-} " == *" $c "* ]]; then
    echo "HAPROXY_CONFIGS: '$c' named twice" >&2
    exit 2
  fi
  HAPROXY_SYSTEMS+=("$c")
done
if [ ${#HAPROXY_SYSTEMS[@]} -lt 1 ] || [ ${#HAPROXY_SYSTEMS[@]} -gt 9 ]; then
  echo "HAPROXY_CONFIGS: 1 to 9 configs (ports $HAPROXY_PORT to $((HAPROXY_PORT + 8)))" >&2
  exit 2
fi

# --- tools ------------------------------------------------------------------------------
if ! command -v haproxy >/dev/null || ! command -v wrk >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update && $SUDO apt-get install -y haproxy wrk
fi
BACKENDS=${BACKENDS:-replica}
# Both balancers get the same number of threads: HAProxy's nbthread, ballot's --workers.
LB_THREADS=${LB_THREADS:-2}
BALLOT_ARGS=${BALLOT_ARGS-"--workers $LB_THREADS"}
# ballot's load bound: window (queries routed over the last 10,000 decisions, the load the
# voting policies are evaluated and trained under) or in-flight (HAProxy's).
BALLOT_LOAD=${BALLOT_LOAD:-window}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p balancer-ops -p replica -p pipelines
fi
BIN=${BIN_DIR:-$ROOT/target/release}
for b in balancer replica ballot; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b" >&2; exit 1; }
done

# --- data: the synthetic log's vocabulary and a replica index ---------------------------
mkdir -p "$BENCH_DIR"
if [ ! -f "$BENCH_DIR/log.freq.tsv" ]; then
  "$BIN/ballot" gen -o "$BENCH_DIR/log.parquet"
fi
if [ "$BACKENDS" = static ]; then
  # No replica runs: the sizes table (term-vote weights) is all ballot needs.
  SIZES=$BENCH_DIR/sizes.parquet
  if [ ! -f "$SIZES" ]; then
    "$BIN/ballot" sizes --log "$BENCH_DIR/log.parquet" --freq "$BENCH_DIR/log.freq.tsv" -o "$SIZES"
  fi
else
  if [ ! -f "$BENCH_DIR/index/manifest.json" ]; then
    rm -rf "$BENCH_DIR/index"
    "$BIN/ballot" build-index -o "$BENCH_DIR/index"
  fi
  SIZES=$BENCH_DIR/index/sizes.parquet
  INDEX_BYTES=$(stat -c %s "$BENCH_DIR/index/postings.bin")
  CACHE_BYTES=${CACHE_BYTES:-$((INDEX_BYTES / 20))}
fi
# Words made of [a-z0-9] only, most frequent first, so they need no URL encoding.
awk -F'\t' -v vocab="${VOCAB:-20000}" \
  'NR > 1 && $1 ~ /^[a-z0-9]+$/ { print $1; if (++n == vocab) exit }' \
  "$BENCH_DIR/log.freq.tsv" >"$BENCH_DIR/words.txt"

RUN=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$RUN"
}
trap cleanup EXIT

wait_port() { # port log
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listening on port $1; log $2:" >&2
  cat "$2" >&2
  exit 1
}

# --- the shared backends ----------------------------------------------------------------
if [ "$BACKENDS" = static ]; then
  # Three HAProxy frontends answering 200 "ok" at once: measures the balancers alone.
  {
    echo "global"
    echo "  maxconn 4096"
    echo "defaults"
    echo "  mode http"
    echo "  timeout client 30s"
    for i in 0 1 2; do
      echo "frontend static$i"
      echo "  bind 127.0.0.1:${PORTS[$i]}"
      echo "  http-request return status 200 content-type text/plain string ok$i"
    done
  } >"$RUN/static.cfg"
  haproxy -f "$RUN/static.cfg" -db >"$RUN/static.log" 2>&1 &
  PIDS+=($!)
  for i in 0 1 2; do wait_port "${PORTS[$i]}" "$RUN/static.log"; done
else
  for i in 0 1 2; do
    "$BIN/replica" --index "$BENCH_DIR/index" --listen "127.0.0.1:${PORTS[$i]}" \
      --cache-bytes "$CACHE_BYTES" --id "r$i" \
      --flash-read-mbps "$FLASH_MBPS" --flash-latency-us "$FLASH_US" \
      >"$RUN/replica$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 0 1 2; do wait_port "${PORTS[$i]}" "$RUN/replica$i.log"; done
fi

# --- HAProxy: one process per config ---------------------------------------------------
declare -A HAPROXY_PORT_OF HAPROXY_PID_OF
for j in "${!HAPROXY_SYSTEMS[@]}"; do
  hs=${HAPROXY_SYSTEMS[$j]}
  if [ "$hs" = haproxy-leastconn ]; then
    BALANCE="  balance leastconn"
  else
    BALANCE="  balance url_param q
  hash-type consistent
  hash-balance-factor ${hs#haproxy-}"
  fi
  HAPROXY_PORT_OF[$hs]=$((HAPROXY_PORT + j))
  cat >"$RUN/$hs.cfg" <<CFG
global
  maxconn 4096
  nbthread $LB_THREADS
defaults
  mode http
  option http-keep-alive
  timeout connect 1s
  timeout client 30s
  timeout server 10s
frontend fe
  bind 127.0.0.1:${HAPROXY_PORT_OF[$hs]}
  default_backend replicas
backend replicas
$BALANCE
  http-reuse always
  option httpchk GET /healthz
  server r0 127.0.0.1:${PORTS[0]} check inter 1s fall 3 rise 2
  server r1 127.0.0.1:${PORTS[1]} check inter 1s fall 3 rise 2
  server r2 127.0.0.1:${PORTS[2]} check inter 1s fall 3 rise 2
CFG
  [ -n "${HAPROXY_EXTRA:-}" ] && printf '  %b\n' "${HAPROXY_EXTRA//\\n/\\n  }" >>"$RUN/$hs.cfg"
  haproxy -f "$RUN/$hs.cfg" -db >"$RUN/$hs.log" 2>&1 &
  PIDS+=($!)
  HAPROXY_PID_OF[$hs]=$!
done

# --- ballot -----------------------------------------------------------------------------
if [ -n "${BENCH_TABLE:-}" ]; then
  POLICY="name = \"table\"
table = \"$(realpath "$BENCH_TABLE")\""
else
  POLICY="name = \"term-vote\""
fi
cat >"$RUN/balancer.toml" <<CFG
listen = "127.0.0.1:$BALLOT_PORT"
admin_listen = "127.0.0.1:$BALLOT_ADMIN"
admin_token = "bench"
eps = 0.05
load = "$BALLOT_LOAD"
request_timeout_ms = 10000
retries = 2
$(printf '%b' "${BALLOT_CONFIG_EXTRA:-}")
[health]
interval_ms = 1000
timeout_ms = 500
fall = 3
rise = 2
[policy]
$POLICY
sizes = "$SIZES"
[[replicas]]
name = "r0"
address = "127.0.0.1:${PORTS[0]}"
[[replicas]]
name = "r1"
address = "127.0.0.1:${PORTS[1]}"
[[replicas]]
name = "r2"
address = "127.0.0.1:${PORTS[2]}"
CFG
"$BIN/balancer" --config "$RUN/balancer.toml" $BALLOT_ARGS >"$RUN/balancer.log" 2>&1 &
PIDS+=($!)
BALLOT_PID=$!
for hs in "${HAPROXY_SYSTEMS[@]}"; do wait_port "${HAPROXY_PORT_OF[$hs]}" "$RUN/$hs.log"; done
wait_port "$BALLOT_PORT" "$RUN/balancer.log"

# --- the load: 1 to 3 terms, each drawn log-uniformly by rank (Zipf s = 1) --------------
cat >"$RUN/queries.lua" <<'LUA'
local words = {}
for w in io.lines(os.getenv("BENCH_WORDS")) do words[#words + 1] = w end
local nwords = #words
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end
function init(args)
  math.randomseed(seed or 1)
end
function request()
  local n = 1 + math.floor(math.random() ^ 2 * 3)
  local terms = {}
  for i = 1, n do
    local rank = math.floor(nwords ^ math.random())
    terms[i] = words[math.max(1, math.min(nwords, rank))]
  end
  return wrk.format("GET", "/search?q=" .. table.concat(terms, "+"))
end
LUA
export BENCH_WORDS="$BENCH_DIR/words.txt"

TIMER=()
[ -x /usr/bin/time ] && TIMER=(/usr/bin/time -f "%U %S")
run_wrk() { # name port duration; wrk's user and system seconds go to $RUN/wrk-NAME.cpu
  "${TIMER[@]}" ${TIMER[@]:+-o "$RUN/wrk-$1.cpu"} wrk -t"$THREADS" -c"$CONNS" -d"$3" --timeout 10s \
    --latency -s "$RUN/queries.lua" "http://127.0.0.1:$2" >"$RUN/wrk-$1.txt" 2>&1 || true
}

# wrk prints "99%   12.34ms"; normalize to milliseconds.
p99_ms() {
  awk '$1 == "99%" {
    v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
    if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000
    printf "%.2f", v }' "$1"
}
rps() { awk '$1 == "Requests/sec:" { print $2 }' "$1"; }
# CPU time (user + system, clock ticks) a process has used: fields 14 and 15 of its stat,
# counted after the parenthesized command name.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
# The balancer's CPU microseconds per answered request over one run: its own cost per
# request (contention with wrk and the backends still raises it: more task switches).
cpu_us_per_request() { # ticks_before ticks_after wrk_output
  awk -v t="$(( $2 - $1 ))" -v hz="$(getconf CLK_TCK)" '/ requests in / {
    if ($1 > 0) printf "%.1f", t / hz * 1e6 / $1; else print "-" }' "$3"
}
# Replicas only: the flash bytes each replica has read (its /stats), one line of numbers.
flash_bytes() {
  [ "$BACKENDS" = replica ] || return 0
  python3 - "${PORTS[@]}" <<'PY'
import json, sys, urllib.request
print(" ".join(str(json.load(urllib.request.urlopen(f"http://127.0.0.1:{p}/stats", timeout=5))["flash_bytes"])
               for p in sys.argv[1:]))
PY
}
# The busiest replica's share of the flash bytes read between two flash_bytes lines.
flash_share_max() {
  [ "$BACKENDS" = replica ] || { echo "-"; return 0; }
  python3 -c '
import sys
b, a = ([int(x) for x in s.split()] for s in sys.argv[1:3])
d = [y - x for x, y in zip(b, a)]
print(f"{max(d) / sum(d):.3f}" if sum(d) > 0 else "-")' "$1" "$2"
}
errors() { awk '/Non-2xx|Socket errors/ { printf "%s ", $0 }' "$1"; }
# wrk's CPU microseconds per request over one run, or "-" without /usr/bin/time.
wrk_us_per_request() { # cpu_file wrk_output
  [ -s "$1" ] || { echo "-"; return 0; }
  awk -v cpu="$(awk '{ print $1 + $2 }' "$1")" '/ requests in / {
    if ($1 > 0) printf "%.1f", cpu * 1e6 / $1; else print "-" }' "$2"
}

if [ -n "${HOLD:-}" ]; then
  for hs in "${HAPROXY_SYSTEMS[@]}"; do
    echo "HAProxy $hs on 127.0.0.1:${HAPROXY_PORT_OF[$hs]} (pid ${HAPROXY_PID_OF[$hs]})"
  done
  echo "holding for ${HOLD}s: ballot on 127.0.0.1:$BALLOT_PORT (pid $BALLOT_PID)"
  echo "load: BENCH_WORDS=$BENCH_WORDS wrk -t$THREADS -c$CONNS -d10s -s $RUN/queries.lua http://127.0.0.1:PORT"
  sleep "$HOLD"
  exit 0
fi

echo
if [ "$BACKENDS" = static ]; then
  echo "backends: 3 x static HAProxy frontends (200 ok): the balancers' own cost"
else
  echo "backends: 3 x replica, cache $CACHE_BYTES bytes each, flash $FLASH_MBPS MB/s + $FLASH_US us"
fi
echo "balancer threads: $LB_THREADS (HAProxy nbthread, ballot --workers);" \
  "HAProxy configs: ${HAPROXY_SYSTEMS[*]}"
echo "load: wrk -t$THREADS -c$CONNS -d$DURATION (after $WARMUP warmup), alternating, $ROUNDS rounds"
printf '%-17s %-6s %12s %10s %12s %12s %12s  %s\n' lb round "requests/s" "p99 ms" "cpu us/req" \
  "wrk us/req" "flash max" "errors"
RATIOS=() # one line per round and HAProxy config: config round ratios (ballot / config)
declare -A CPU # CPU us per request of this round's run, by balancer
for round in $(seq 1 "$ROUNDS"); do
  for lb in "${HAPROXY_SYSTEMS[@]}" ballot; do
    if [ "$lb" = ballot ]; then
      port=$BALLOT_PORT pid=$BALLOT_PID
    else
      port=${HAPROXY_PORT_OF[$lb]} pid=${HAPROXY_PID_OF[$lb]}
    fi
    PAGE_PID=""
    if [ "$lb" = ballot ] && [ "${STATUS_PAGE:-0}" = 1 ]; then
      # The status page open and refreshing, STATUS_EVERY seconds apart (a browser: 5 s).
      while :; do
        curl -s -o /dev/null -H "Authorization: Bearer bench" \
          "http://127.0.0.1:$BALLOT_ADMIN${STATUS_PATH:-/admin/status}" || true
        sleep "${STATUS_EVERY:-1}"
      done &
      PAGE_PID=$!
    fi
    run_wrk "$lb-warm" "$port" "$WARMUP"
    before=$(flash_bytes)
    ticks=$(cpu_ticks "$pid")
    run_wrk "$lb" "$port" "$DURATION"
    ticks_after=$(cpu_ticks "$pid")
    [ -n "$PAGE_PID" ] && { kill "$PAGE_PID"; wait "$PAGE_PID" 2>/dev/null || true; }
    after=$(flash_bytes)
    f="$RUN/wrk-$lb.txt"
    CPU[$lb]=$(cpu_us_per_request "$ticks" "$ticks_after" "$f")
    printf '%-17s %-6s %12s %10s %12s %12s %12s  %s\n' "$lb" "$round" "$(rps "$f")" \
      "$(p99_ms "$f")" "${CPU[$lb]}" "$(wrk_us_per_request "$RUN/wrk-$lb.cpu" "$f")" \
      "$(flash_share_max "$before" "$after")" "$(errors "$f")"
    cp "$f" "$BENCH_DIR/wrk-$lb-t$LB_THREADS-round$round.txt"
  done
  for hs in "${HAPROXY_SYSTEMS[@]}"; do
    RATIOS+=("$hs $round $(awk -v hr="$(rps "$BENCH_DIR/wrk-$hs-t$LB_THREADS-round$round.txt")" \
      -v br="$(rps "$BENCH_DIR/wrk-ballot-t$LB_THREADS-round$round.txt")" \
      -v hp="$(p99_ms "$BENCH_DIR/wrk-$hs-t$LB_THREADS-round$round.txt")" \
      -v bp="$(p99_ms "$BENCH_DIR/wrk-ballot-t$LB_THREADS-round$round.txt")" \
      -v hc="${CPU[$hs]}" -v bc="${CPU[ballot]}" \
      'BEGIN { if (hr > 0 && hp > 0) printf "%.2f %.2f", br / hr, bp / hp; else printf "- -"
               if (hc > 0 && bc > 0) printf " %.2f\n", bc / hc; else print " -" }')")
  done
done
echo
echo "ballot / each HAProxy config per round (targets, on the median of the rounds:" \
  "requests/s >= $TARGET_RPS, p99 <= $TARGET_P99):"
for line in "${RATIOS[@]}"; do
  read -r hs round rr pr cr <<<"$line"
  printf '  %-17s round %-3s requests/s x%s  p99 x%s  cpu per request x%s\n' \
    "$hs" "$round" "$rr" "$pr" "$cr"
done
echo
echo "raw wrk output: $BENCH_DIR/wrk-*-t$LB_THREADS-round*.txt"
# The verdict: for each HAProxy config, the median round against each target; a missed
# target fails the script.
printf '%s\n' "${RATIOS[@]}" | python3 -c '
import statistics, sys
target_rps, target_p99 = float(sys.argv[1]), float(sys.argv[2])
configs = sys.argv[3:]
rows = [l.split() for l in sys.stdin if l.strip()]
missed, met = [], []
for hs in configs:
    mine = [r for r in rows if r[0] == hs]
    rps = [float(r[2]) for r in mine if r[2] != "-"]
    p99 = [float(r[3]) for r in mine if r[3] != "-"]
    if not rps or not p99:
        missed.append(f"no round measured both ballot and {hs}: no verdict")
        continue
    m_rps, m_p99 = statistics.median(rps), statistics.median(p99)
    if m_rps < target_rps:
        missed.append(f"ballot served {m_rps:.2f}x {hs} requests/s (median of {len(rps)} rounds), "
                      f"target >= {target_rps}")
    if m_p99 > target_p99:
        missed.append(f"ballot p99 was {m_p99:.2f}x {hs} (median of {len(p99)} rounds), "
                      f"target <= {target_p99}")
    if m_rps >= target_rps and m_p99 <= target_p99:
        met.append(f"{hs}: requests/s {m_rps:.2f}x >= {target_rps}, p99 {m_p99:.2f}x <= "
                   f"{target_p99} (medians of {len(rps)} rounds)")
for line in met:
    print("targets met vs " + line)
if missed:
    sys.exit("TARGET MISSED: " + "; ".join(missed))
' "$TARGET_RPS" "$TARGET_P99" "${HAPROXY_SYSTEMS[@]}"
