#!/usr/bin/env bash
# Chaos soak of ballot's serving path, on loopback only: REPLICAS replicas behind one
# balancer (policy `table`), an open-loop replay at LOAD x saturation, and a chaos loop:
#
#   * every CHAOS_EVERY seconds, in turn: kill -9 replica r0 and restart it on its port;
#     pause replica r1 (SIGSTOP) for PAUSE_SECS, then SIGCONT; reload the voting table
#     through the admin API (by path from tables_dir, then by upload, alternately); drain
#     replica r2 through the admin API for DRAIN_SECS, then enable it;
#   * all along: SLOWLORIS connections to the balancer that send a request head one byte
#     every 5 s (closed by the header timeout, and reopened at once).
#
# Saturation is measured first on warm caches (closed loop, SAT_CONCURRENCY workers, WARM_SECS
# seconds of warm-up then SAT_SECS seconds measured, unless RATE is set), then one open-loop
# replay runs for DURATION seconds over CONNECTIONS keep-alive connections, reported in
# windows of WINDOW seconds (`--interval`): a fixed client population whose connections stay
# open, rather than a new replay per window that closes them all at once, or a connection
# per request in flight that follows every latency spike.
# Every SAMPLE_EVERY seconds the balancer's and each replica's resident memory (VmRSS) and
# open file descriptors are read from /proc.
#
# Output (also in SOAK_DIR/report.txt): requests sent, answered and failed by kind, and the
# p99 latency (from each request's intended send time) per window, with the chaos events of
# that window; RSS and open descriptors over time per process; slowloris connections opened
# and closed by the server. The raw data stay in SOAK_DIR: load.json (the ballot replay
# report, with its windows and failures by second), events.tsv, samples.tsv, the processes'
# logs.
#
# Knobs (environment): DURATION (600 s), WINDOW (60 s), LOAD (0.7), CONNECTIONS (512: the
# open loop's keep-alive connections, `ballot replay --connections`), RATE (whole queries/s;
# empty: LOAD x measured saturation), WARM_SECS (10), SAT_SECS (10), SAT_CONCURRENCY (32),
# REPLICAS (4, at least 3), SYNTH_QUERIES (200000), DOCS (200000), CACHE_FRAC (0.05 of the
# index's postings bytes per replica), FLASH_MBPS (20 per replica; 0 = no emulation),
# FLASH_US (100), EVICTION (sieve, the replica's default: every replica's cache, and what the
# table is trained for),
# CHAOS_EVERY (30 s), KILL_BUDGET (10 s: failures of requests sent within this
# long after a kill are reported apart from all others), PAUSE_SECS (10), DRAIN_SECS (5), SLOWLORIS (200),
# SAMPLE_EVERY (5 s), SOAK_DIR (a fresh directory under target/soak), SKIP_BUILD=1 (use the
# binaries in BIN_DIR), BIN_DIR (target/release), BALANCER_EXTRA (top-level TOML lines added
# to the balancer's config, `\n`-separated), MAX_RSS_DRIFT (25: the largest distance, in
# percent, of a process's per-window median resident memory from its median after warm-up).
#
# Targets (the soak exits 1 naming each one missed): no request fails, the balancer answers
# /healthz after the soak, and no process that was not restarted drifts past MAX_RSS_DRIFT.
#
# Needs bash, curl, python3 (to read the replay reports) and /proc (Linux). Stops by itself
# after DURATION plus start-up (about 40 s) and one window; every wait is bounded; Ctrl-C
# stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

DURATION=${DURATION:-600}
WINDOW=${WINDOW:-60}
LOAD=${LOAD:-0.7}
RATE=${RATE:-}
SAT_SECS=${SAT_SECS:-10}
WARM_SECS=${WARM_SECS:-10}
SAT_CONCURRENCY=${SAT_CONCURRENCY:-32}
REPLICAS=${REPLICAS:-4}
SYNTH_QUERIES=${SYNTH_QUERIES:-200000}
DOCS=${DOCS:-200000}
CACHE_FRAC=${CACHE_FRAC:-0.05}
FLASH_MBPS=${FLASH_MBPS:-20}
FLASH_US=${FLASH_US:-100}
EVICTION=${EVICTION:-sieve}
CHAOS_EVERY=${CHAOS_EVERY:-30}
KILL_BUDGET=${KILL_BUDGET:-10}
CONNECTIONS=${CONNECTIONS:-512}
PAUSE_SECS=${PAUSE_SECS:-10}
DRAIN_SECS=${DRAIN_SECS:-5}
SLOWLORIS=${SLOWLORIS:-200}
SAMPLE_EVERY=${SAMPLE_EVERY:-5}
MAX_RSS_DRIFT=${MAX_RSS_DRIFT:-25}
BIN_DIR=${BIN_DIR:-$ROOT/target/release}
TOKEN=soak-$$-$RANDOM
BALANCER_EXTRA=${BALANCER_EXTRA:-}

[ "$REPLICAS" -ge 3 ] || { echo "REPLICAS must be at least 3 (r0 killed, r1 paused, r2 drained)" >&2; exit 2; }
[ "$WINDOW" -ge 5 ] || { echo "WINDOW must be at least 5 s" >&2; exit 2; }
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 2; }
done
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p pipelines -p replica -p balancer-ops
fi
for b in balancer replica ballot; do
  [ -x "$BIN_DIR/$b" ] || { echo "missing $BIN_DIR/$b" >&2; exit 1; }
done

SOAK_DIR=${SOAK_DIR:-$ROOT/target/soak/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$SOAK_DIR/tables"
SOAK_DIR=$(cd "$SOAK_DIR" && pwd)
EVENTS=$SOAK_DIR/events.tsv
SAMPLES=$SOAK_DIR/samples.tsv
printf 't_s\tevent\n' >"$EVENTS"
printf 't_s\tprocess\tpid\trss_kb\tfds\n' >"$SAMPLES"
echo "soak: results in $SOAK_DIR"

# --- children ---------------------------------------------------------------------------
declare -a RPID RPORT
BPID=""
BG=()
cleanup() {
  local p pids
  for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
  # The chaos loop restarts r0 in a subshell: its pid is in r0.pid.
  pids="${RPID[*]} $BPID $(cat "$SOAK_DIR"/r*.pid 2>/dev/null || true)"
  for p in $pids; do
    kill -CONT "$p" 2>/dev/null || true
    kill -TERM "$p" 2>/dev/null || true
  done
  sleep 1
  for p in $pids "${BG[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0NS=$(date +%s%N)
echo "$T0NS" >"$SOAK_DIR/t0_ns"
now() { # seconds since the start, one decimal
  local d=$((($(date +%s%N) - T0NS) / 100000000))
  printf '%d.%d' $((d / 10)) $((d % 10))
}
event() { printf '%s\t%s\n' "$(now)" "$*" >>"$EVENTS"; echo "[$(now) s] $*"; }

# wait_line FILE PREFIX SECONDS: prints the rest of the first line of FILE starting with PREFIX.
wait_line() {
  local file=$1 prefix=$2 limit=$3 i line
  for ((i = 0; i < limit * 20; i++)); do
    line=$(grep -m1 "^$prefix" "$file" 2>/dev/null || true)
    if [ -n "$line" ]; then echo "${line#"$prefix"}"; return 0; fi
    sleep 0.05
  done
  echo "timed out waiting for '$prefix' in $file" >&2
  return 1
}

# --- data -------------------------------------------------------------------------------
INDEX=$SOAK_DIR/index
"$BIN_DIR/ballot" build-index --synth-queries "$SYNTH_QUERIES" --docs "$DOCS" -o "$INDEX" >"$SOAK_DIR/build-index.log" 2>&1
"$BIN_DIR/ballot" train --synth-queries "$SYNTH_QUERIES" --sizes "$INDEX/sizes.parquet" \
  --replicas "$REPLICAS" --eviction "$EVICTION" -o "$SOAK_DIR/tables/table.parquet" >"$SOAK_DIR/train.log" 2>&1
CACHE_BYTES=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(int(m["postings_bytes"] * float(sys.argv[2])))' "$INDEX/manifest.json" "$CACHE_FRAC")

# --- processes --------------------------------------------------------------------------
start_replica() { # start_replica I [PORT]
  local i=$1 listen=127.0.0.1:${2:-0} log=$SOAK_DIR/r$1.log
  local args=(--index "$INDEX" --listen "$listen" --cache-bytes "$CACHE_BYTES" --eviction "$EVICTION" --id "r$i")
  if [ "$FLASH_MBPS" != 0 ]; then args+=(--flash-read-mbps "$FLASH_MBPS" --flash-latency-us "$FLASH_US"); fi
  : >"$log.out"
  "$BIN_DIR/replica" "${args[@]}" >"$log.out" 2>>"$log" &
  RPID[i]=$!
  local addr
  addr=$(wait_line "$log.out" "listening on " 20)
  RPORT[i]=${addr##*:}
}
for ((i = 0; i < REPLICAS; i++)); do start_replica "$i"; done

CONFIG=$SOAK_DIR/balancer.toml
{
  printf 'listen = "127.0.0.1:0"\nadmin_listen = "127.0.0.1:0"\nadmin_token = "%s"\n' "$TOKEN"
  printf 'tables_dir = "%s"\nrequest_timeout_ms = 1000\ndeadline_ms = 5000\nretries = 2\n' "$SOAK_DIR/tables"
  printf '%b\n' "$BALANCER_EXTRA"
  printf '\n[health]\ninterval_ms = 500\ntimeout_ms = 500\nfall = 2\nrise = 2\n'
  printf '\n[policy]\nname = "table"\ntable = "%s"\nsizes = "%s"\n' "$SOAK_DIR/tables/table.parquet" "$INDEX/sizes.parquet"
  for ((i = 0; i < REPLICAS; i++)); do
    printf '\n[[replicas]]\nname = "r%d"\naddress = "127.0.0.1:%s"\n' "$i" "${RPORT[i]}"
  done
} >"$CONFIG"
"$BIN_DIR/balancer" --config "$CONFIG" >"$SOAK_DIR/balancer.out" 2>"$SOAK_DIR/balancer.log" &
BPID=$!
LB=$(wait_line "$SOAK_DIR/balancer.out" "listening on " 30)
ADMIN=$(wait_line "$SOAK_DIR/balancer.out" "admin on " 5)
LB_PORT=${LB##*:}
event "started: balancer $LB (admin $ADMIN), replicas on ports ${RPORT[*]}"

admin() { # admin METHOD PATH [curl args...]
  local method=$1 path=$2
  shift 2
  curl -sS -m 10 -o /dev/null -w '%{http_code}' -X "$method" \
    -H "Authorization: Bearer $TOKEN" "$@" "http://$ADMIN$path" || echo "curl-failed"
}

REPLAY=("$BIN_DIR/ballot" replay --target "http://$LB" --part all --timeout 10s)

# --- saturation -------------------------------------------------------------------------
# A replay ends when its log does: the synthetic log is made long enough for the window
# (its queries follow the same distribution whatever its length). The caches are warmed
# first (closed loop, WARM_SECS), so saturation is measured on warm replicas.
if [ -z "$RATE" ]; then
  SAT_QUERIES=$((SYNTH_QUERIES > 30000 * SAT_SECS ? SYNTH_QUERIES : 30000 * SAT_SECS))
  if [ "$WARM_SECS" -gt 0 ]; then
    timeout $((WARM_SECS + 60)) "${REPLAY[@]}" --synth-queries "$SAT_QUERIES" --shuffle-seed 1000 \
      --concurrency "$SAT_CONCURRENCY" --duration "${WARM_SECS}s" >"$SOAK_DIR/warm-up.txt" 2>&1
  fi
  timeout $((SAT_SECS + 60)) "${REPLAY[@]}" --synth-queries "$SAT_QUERIES" \
    --concurrency "$SAT_CONCURRENCY" --duration "${SAT_SECS}s" \
    --json "$SOAK_DIR/saturation.json" >"$SOAK_DIR/saturation.txt" 2>&1
  RATE=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(max(1, round(r["throughput_qps"] * float(sys.argv[2]))))' "$SOAK_DIR/saturation.json" "$LOAD")
  event "saturation $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["throughput_qps"]))' "$SOAK_DIR/saturation.json") q/s; open loop at $RATE q/s ($LOAD x)"
else
  event "open loop at RATE=$RATE q/s"
fi
LOAD_QUERIES=$((RATE * DURATION * 11 / 10 + 1000))
[ "$LOAD_QUERIES" -ge "$SYNTH_QUERIES" ] || LOAD_QUERIES=$SYNTH_QUERIES

# --- background: sampler, slowloris, chaos ----------------------------------------------
sampler() {
  set +e
  local i p
  while :; do
    for p in balancer:$BPID $(for ((i = 0; i < REPLICAS; i++)); do echo "r$i:$(cat "$SOAK_DIR/r$i.pid")"; done); do
      local name=${p%%:*} pid=${p##*:} rss fds
      rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
      fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l || true)
      [ -n "$rss" ] && printf '%s\t%s\t%s\t%s\t%s\n' "$(now)" "$name" "$pid" "$rss" "$fds" >>"$SAMPLES"
    done
    sleep "$SAMPLE_EVERY"
  done
}
for ((i = 0; i < REPLICAS; i++)); do echo "${RPID[i]}" >"$SOAK_DIR/r$i.pid"; done

slowloris() { # holds SLOWLORIS connections, each sending one byte every 5 s
  # Each connection the server closes (its header timeout) is reopened at once, so the
  # balancer holds SLOWLORIS of them all along: the attack stays the same size, and the
  # balancer's descriptor count does not swing with the attacker's reconnect rhythm.
  exec python3 - "$LB_PORT" "$SLOWLORIS" "$SOAK_DIR/slowloris.state" <<'PY'
import selectors, socket, sys, time
port, count, state = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sel = selectors.DefaultSelector()
opened = closed = 0
def open_one(i):
    global opened
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /search?q=slow%d HTTP/1.1\r\nHost: soak\r\n" % i)
    except OSError:
        s.close()
        return False
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, i)
    opened += 1
    return True
for i in range(count):
    open_one(i)
down = []  # slots whose connection could not be opened, retried at the next tick
next_tick = time.monotonic() + 5
while True:
    for key, _ in sel.select(timeout=max(0.0, next_tick - time.monotonic())):
        s, i = key.fileobj, key.data
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if data:
            continue  # an answer (408, say) before the close: wait for the close itself
        sel.unregister(s)
        s.close()
        closed += 1
        if not open_one(i):
            down.append(i)
    if time.monotonic() >= next_tick:
        next_tick += 5
        for key in list(sel.get_map().values()):
            try:
                key.fileobj.send(b"a")
            except OSError:
                pass  # the close shows up as readable at the next select
        down = [i for i in down if not open_one(i)]
        with open(state, "w") as f:
            f.write(f"{opened} {closed}\n")
PY
}

chaos() {
  set +e
  local step=0 r0 r1 r2 code
  sleep "$CHAOS_EVERY"
  while :; do
    case $((step % 4)) in
      0)
        r0=$(cat "$SOAK_DIR/r0.pid")
        event "chaos: kill -9 r0 (pid $r0)"
        kill -KILL "$r0" 2>/dev/null || true
        sleep 1
        local log=$SOAK_DIR/r0.log args=(--index "$INDEX" --listen "127.0.0.1:${RPORT[0]}" --cache-bytes "$CACHE_BYTES" --id r0)
        if [ "$FLASH_MBPS" != 0 ]; then args+=(--flash-read-mbps "$FLASH_MBPS" --flash-latency-us "$FLASH_US"); fi
        : >"$log.out"
        "$BIN_DIR/replica" "${args[@]}" >"$log.out" 2>>"$log" &
        echo $! >"$SOAK_DIR/r0.pid"
        if wait_line "$log.out" "listening on " 20 >/dev/null; then
          event "chaos: r0 restarted (pid $(cat "$SOAK_DIR/r0.pid"))"
        else
          event "chaos: r0 did not restart"
        fi
        ;;
      1)
        r1=$(cat "$SOAK_DIR/r1.pid")
        event "chaos: SIGSTOP r1 for ${PAUSE_SECS}s"
        kill -STOP "$r1"
        sleep "$PAUSE_SECS"
        kill -CONT "$r1"
        event "chaos: SIGCONT r1"
        ;;
      2)
        if [ $(((step / 4) % 2)) = 0 ]; then
          code=$(admin POST /admin/table -H 'Content-Type: application/json' --data '{"path": "table.parquet"}')
          event "chaos: table reload by path: HTTP $code"
        else
          code=$(admin POST /admin/table -H 'Content-Type: application/octet-stream' --data-binary "@$SOAK_DIR/tables/table.parquet")
          event "chaos: table reload by upload: HTTP $code"
        fi
        ;;
      3)
        code=$(admin POST /admin/replicas/r2/drain)
        event "chaos: drain r2: HTTP $code"
        sleep "$DRAIN_SECS"
        code=$(admin POST /admin/replicas/r2/enable)
        event "chaos: enable r2: HTTP $code"
        ;;
    esac
    step=$((step + 1))
    sleep "$CHAOS_EVERY"
  done
}

sampler &
BG+=($!)
if [ "$SLOWLORIS" -gt 0 ]; then
  slowloris &
  BG+=($!)
fi
chaos &
BG+=($!)

# --- load -------------------------------------------------------------------------------
event "load: ${DURATION}s at $RATE q/s, reported every ${WINDOW}s"
timeout $((DURATION + 120)) "${REPLAY[@]}" --synth-queries "$LOAD_QUERIES" --rate "$RATE" \
  --duration "${DURATION}s" --interval "${WINDOW}s" --connections "$CONNECTIONS" \
  --json "$SOAK_DIR/load.json" >"$SOAK_DIR/load.txt" 2>&1 ||
  event "load: replay exited with status $?"
event "load done"
# Still alive and answering?
ALIVE=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' "http://$LB/healthz" || echo down)
event "balancer /healthz after the soak: $ALIVE"
# Where failures came from: the balancer's counters and the replicas' shed counts.
{
  curl -sS -m 5 "http://$ADMIN/metrics" 2>/dev/null |
    grep -E '^ballot_(client_errors_total|upstream_failures_total|retries_total|ejections_total|table_reload_failures_total|table_version)' || true
  for ((i = 0; i < REPLICAS; i++)); do
    printf 'r%d ' "$i"
    curl -sS -m 5 "http://127.0.0.1:${RPORT[i]}/metrics" 2>/dev/null | grep -E '^replica_errors_total' | tr '\n' ' ' || true
    echo
  done
} >"$SOAK_DIR/counters.txt"
for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
BG=()

# --- report -----------------------------------------------------------------------------
python3 - "$SOAK_DIR" "$WINDOW" "$ALIVE" "$KILL_BUDGET" "$MAX_RSS_DRIFT" <<'PY' | tee "$SOAK_DIR/report.txt"
import csv, json, os, statistics, sys
d, window, alive, kill_budget = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
max_drift = float(sys.argv[5])
drifts = {}
t0_ms = int(open(f"{d}/t0_ns").read()) / 1e6
events = [(float(r["t_s"]), r["event"]) for r in csv.DictReader(open(f"{d}/events.tsv"), delimiter="\t")]
kills = [t for t, e in events if e.startswith("chaos: kill -9")]
def after_kill(t):
    return any(k <= t < k + kill_budget for k in kills)
if not os.path.exists(f"{d}/load.json"):
    sys.exit("no load report: see load.txt")
r = json.load(open(f"{d}/load.json"))
began = (r["started_unix_ms"] - t0_ms) / 1000  # the replay's start on the soak's clock
print("window  start_s    sent      ok  failed  after-kill  p99_ms  failures by kind; chaos events")
for iv in r["intervals"] or []:
    t0, t1 = began + iv["start_s"], began + iv["start_s"] + window
    chaos = [e.removeprefix("chaos: ") for t, e in events if e.startswith("chaos:") and t0 <= t < t1]
    errs = ", ".join(f"{k} {v}" for k, v in sorted(iv["errors"].items())) or "-"
    # Each failure at the second it was sent, on the soak's clock.
    ak = sum(n for sec, n in r["failures_by_second"].items()
             if t0 <= began + int(sec) < t1 and after_kill(began + int(sec) + 0.5))
    w = int(iv["start_s"] // window) + 1
    print(f"{w:>6}  {t0:>7.1f}  {iv['sent']:>6}  {iv['ok']:>6}  {iv['error_total']:>6}  {ak:>10}  "
          f"{iv['latency_ms']['p99']:>6.1f}  {errs}; {'; '.join(chaos) or '-'}")
failed = r["error_total"]
after_kills = sum(n for sec, n in r["failures_by_second"].items() if after_kill(began + int(sec) + 0.5))
kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items()))
print(f"total: sent {r['sent']}, ok {r['ok']}, failed {failed}" + (f" ({kinds})" if kinds else "")
      + f"; p99 {r['latency_ms']['p99']:.1f} ms")
print(f"failed within {kill_budget:g} s after a kill: {after_kills}; failed at any other time: {failed - after_kills}")
print(f"balancer /healthz after the soak: {alive}")
print("counters at the end (replica counters since its last start):")
for line in open(f"{d}/counters.txt"):
    print("  " + line.rstrip())
sl = f"{d}/slowloris.state"
if os.path.exists(sl):
    opened, closed = open(sl).read().split()
    print(f"slowloris: {opened} connections opened, {closed} closed by the server")
rows = list(csv.DictReader(open(f"{d}/samples.tsv"), delimiter="\t"))
warm = began + window  # the first window warms up
done = next((t for t, e in events if e == "load done"), float("inf"))
print()
print("process  samples   rss_mb first/after-warm-up/last/max    fds first/after-warm-up/last/max")
for name in ["balancer"] + sorted({r["process"] for r in rows} - {"balancer"}):
    rs = [r for r in rows if r["process"] == name]
    if not rs:
        continue
    after = [r for r in rs if float(r["t_s"]) >= warm] or rs
    mb = lambda r: int(r["rss_kb"]) / 1024
    fd = lambda r: int(r["fds"])
    print(f"{name:<8} {len(rs):>7}   {mb(rs[0]):6.1f} {mb(after[0]):6.1f} {mb(rs[-1]):6.1f} {max(map(mb, rs)):6.1f}"
          f"    {fd(rs[0]):5} {fd(after[0]):5} {fd(rs[-1]):5} {max(map(fd, rs)):5}")
print()
print("after warm-up, until the load ends: min / median / max and the largest distance of a sample from the median;")
print("the medians of each window, and the largest distance of one from the overall median")
for name in ["balancer"] + sorted({r["process"] for r in rows} - {"balancer"}):
    after = [r for r in rows if r["process"] == name and warm <= float(r["t_s"]) < done]
    if not after:
        continue
    if len({r["pid"] for r in after}) > 1:
        print(f"  {name:<8} restarted {len({r['pid'] for r in after}) - 1} times after warm-up: not compared")
        continue
    for what, key, unit in (("rss", "rss_kb", 1024), ("fds", "fds", 1)):
        vals = [int(r[key]) / unit for r in after]
        med = statistics.median(vals)
        dev = max(abs(v - med) for v in vals) / med * 100 if med else 0.0
        # Drift, apart from the transients of single chaos events: each window's median.
        per = {}
        for r in after:
            per.setdefault(int((float(r["t_s"]) - began) // window), []).append(int(r[key]) / unit)
        meds = [statistics.median(v) for v in per.values()]
        drift = max(abs(m - med) for m in meds) / med * 100 if med else 0.0
        if what == "rss":
            drifts[name] = drift
        print(f"  {name:<8} {what}  {min(vals):8.1f} {med:8.1f} {max(vals):8.1f}   {dev:5.1f}%"
              f"   window medians {min(meds):8.1f} .. {max(meds):8.1f}   {drift:5.1f}%")
print()
print("rss_mb and fds over time (balancer):")
bal = [r for r in rows if r["process"] == "balancer"]
step = max(1, len(bal) // 20)
for r in bal[::step]:
    print(f"  t={float(r['t_s']):7.1f}s  rss {int(r['rss_kb']) / 1024:6.1f} MB  fds {r['fds']}")

# The verdict on the targets: a missed one fails the soak.
missed = []
if failed:
    missed.append(f"{failed} requests failed, target 0")
if alive != "200":
    missed.append(f"the balancer answered /healthz with {alive} after the soak, target 200")
for name, drift in drifts.items():
    if drift > max_drift:
        missed.append(f"{name}: resident memory's window medians drift {drift:.1f}% from its median, target <= {max_drift:g}%")
print()
if missed:
    sys.exit("TARGET MISSED: " + "; ".join(missed))
print(f"targets met: 0 failed requests, /healthz 200 after the soak, resident memory of every process not restarted within {max_drift:g}% of its median")
PY
