# Shared by the bench scripts that start and stop processes (sourced, not run): every process
# a script starts goes into PIDS, and every wait is bounded.

PIDS=()

# SIGTERM everything in PIDS, then SIGKILL what is left after 5 s.
stop_all() {
  local p alive
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

# wait_line LOG PATTERN PID [SECONDS]: waits (20 s by default) for a line of LOG matching
# PATTERN; fails, printing the log, if the process dies or the time runs out.
wait_line() {
  local tries=$((${4:-20} * 20))
  for _ in $(seq 1 "$tries"); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  echo "no '$2' in $1:" >&2
  cat "$1" >&2
  exit 1
}

# start_replicas TAG: starts REPLICAS `replica` processes of BIN on PORTS over INDEX (with
# CACHE_BYTES, EVICTION, FLASH_MBPS, FLASH_US), logging to RUN/TAG-replicaI.log, and waits
# until each listens.
start_replicas() {
  local i pids=()
  for i in $(seq 0 $((REPLICAS - 1))); do
    "$BIN/replica" --index "$INDEX" --listen "127.0.0.1:${PORTS[$i]}" \
      --cache-bytes "$CACHE_BYTES" --eviction "$EVICTION" --id "r$i" \
      --flash-read-mbps "$FLASH_MBPS" --flash-latency-us "$FLASH_US" \
      >"$RUN/$1-replica$i.log" 2>&1 &
    PIDS+=($!)
    pids+=($!)
  done
  for i in $(seq 0 $((REPLICAS - 1))); do
    wait_line "$RUN/$1-replica$i.log" "^listening on" "${pids[$i]}"
  done
}

# The load balancers of the end-to-end scripts. They read: RUN (logs and configs), BIN,
# REPLICAS and PORTS (the backends), LB_THREADS; HAProxy: HAPROXY_PORT, BALANCE_FACTOR (the
# `haproxy` alias); ballot: BALLOT_PORT, BALLOT_ADMIN, EPS, BALLOT_LOAD, TABLE, SIZES,
# BALLOT_CONFIG_EXTRA (top-level TOML lines, `\n`-separated) and BALLOT_CONFIG_TAIL (tables
# appended at the end).

# The HAProxy systems, each HAProxy at one of its settings for this job:
#   haproxy-N          `balance url_param q` + `hash-type consistent` + `hash-balance-factor N`
#                      (consistent hashing of the whole query with bounded loads, eps =
#                      N / 100 - 1; HAProxy takes N > 100), e.g. haproxy-105, -125, -150;
#   haproxy-leastconn  `balance leastconn` (the fewest connections in flight, no affinity);
#   haproxy            the old name, kept as an alias of haproxy-BALANCE_FACTOR (eps = EPS).
# haproxy_system NAME prints the system NAME stands for (the alias resolved) and fails,
# printing nothing, when NAME is no HAProxy system.
haproxy_system() {
  local n=$1
  [ "$n" = haproxy ] && n=haproxy-$BALANCE_FACTOR
  case $n in
    haproxy-leastconn) ;;
    haproxy-*) [[ ${n#haproxy-} =~ ^[1-9][0-9]*$ ]] && [ "${n#haproxy-}" -gt 100 ] || return 1 ;;
    *) return 1 ;;
  esac
  echo "$n"
}

# haproxy_config_systems CONFIG...: the system names of HAPROXY_CONFIGS' words (105,
# leastconn, or a system name as haproxy-150 or haproxy), space-separated, not yet checked.
haproxy_config_systems() {
  local c out=""
  for c in "$@"; do
    case $c in
      haproxy | haproxy-*) out="$out $c" ;;
      *) out="$out haproxy-$c" ;;
    esac
  done
  echo "${out# }"
}

# resolve_systems KNOWN: SYSTEMS with `haproxy` resolved to its config; a word that is
# neither one of KNOWN (the ballot systems the calling script runs, space-separated) nor an
# HAProxy system, or a system named twice, stops the run (each system's files are named
# after it).
resolve_systems() {
  local known=$1 checked="" s h
  for s in $SYSTEMS; do
    if h=$(haproxy_system "$s"); then
      s=$h
    elif [[ " $known " != *" $s "* ]]; then
      echo "SYSTEMS: unknown system '$s' (${known// /, }, haproxy-N with N > 100," \
        "haproxy-leastconn, haproxy)" >&2
      exit 2
    fi
    if [[ " $checked " == *" $s "* ]]; then
      echo "SYSTEMS: '$s' named twice (haproxy is haproxy-$BALANCE_FACTOR)" >&2
      exit 2
    fi
    checked="$checked $s"
  done
  SYSTEMS=${checked# }
}

wait_port() { # port log pid (HAProxy prints nothing when it is ready)
  for _ in $(seq 1 400); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  echo "nothing listening on port $1; log $2:" >&2
  cat "$2" >&2
  exit 1
}

start_haproxy() { # run-tag [system]: one HAProxy system (haproxy_system; default haproxy)
  local sys
  if ! sys=$(haproxy_system "${2:-haproxy}"); then
    echo "start_haproxy: no HAProxy system '${2:-haproxy}'" >&2
    exit 1
  fi
  {
    echo "global"
    echo "  maxconn 4096"
    echo "  nbthread $LB_THREADS"
    echo "defaults"
    echo "  mode http"
    echo "  option http-keep-alive"
    echo "  timeout connect 1s"
    echo "  timeout client 30s"
    echo "  timeout server 10s"
    echo "frontend fe"
    echo "  bind 127.0.0.1:$HAPROXY_PORT"
    echo "  default_backend replicas"
    echo "backend replicas"
    if [ "$sys" = haproxy-leastconn ]; then
      echo "  balance leastconn"
    else
      echo "  balance url_param q"
      echo "  hash-type consistent"
      echo "  hash-balance-factor ${sys#haproxy-}"
    fi
    echo "  http-reuse always"
    echo "  option httpchk GET /healthz"
    for i in $(seq 0 $((REPLICAS - 1))); do
      echo "  server r$i 127.0.0.1:${PORTS[$i]} check inter 1s fall 3 rise 2"
    done
  } >"$RUN/$1-haproxy.cfg"
  haproxy -f "$RUN/$1-haproxy.cfg" -db >"$RUN/$1-haproxy.log" 2>&1 &
  PIDS+=($!)
  wait_port "$HAPROXY_PORT" "$RUN/$1-haproxy.log" $!
}

# start_ballot RUN POLICY: `table-evidence` is the table with the shadow caches' evidence,
# `table-late` the table with late binding (LATE_SLOTS places per replica, `steal_after_ms`
# LATE_STEAL_AFTER_MS; 2 and 0 by default, the best of docs/results.md's sweep).
start_ballot() {
  local name=${2%-evidence}
  name=${name%-late}
  local policy="name = \"$name\"" late=""
  case $2 in
    table-late) policy="$policy
table = \"$TABLE\""
      late="replica_max_in_flight = ${LATE_SLOTS:-2}
steal_after_ms = ${LATE_STEAL_AFTER_MS:-0}" ;;
    table) policy="$policy
table = \"$TABLE\"" ;;
    table-evidence) policy="$policy
table = \"$TABLE\"
cache_evidence = 1" ;;
  esac
  local load=$BALLOT_LOAD
  if [ "$load" = auto ]; then
    # As `ballot eval --load auto`: the learned table bounds work, the others query counts.
    case $2 in table | table-evidence | table-late) load=work ;; *) load=window ;; esac
  fi
  {
    echo "listen = \"127.0.0.1:$BALLOT_PORT\""
    echo "admin_listen = \"127.0.0.1:$BALLOT_ADMIN\""
    echo "admin_token = \"bench\""
    echo "eps = $EPS"
    echo "load = \"$load\""
    if [ -n "${BALLOT_CONFIG_EXTRA:-}" ]; then printf '%b\n' "$BALLOT_CONFIG_EXTRA"; fi
    if [ -n "$late" ]; then echo "$late"; fi
    echo "request_timeout_ms = 10000"
    echo "retries = 2"
    echo "[health]"
    echo "interval_ms = 1000"
    echo "timeout_ms = 500"
    echo "fall = 3"
    echo "rise = 2"
    echo "[policy]"
    echo "$policy"
    echo "sizes = \"$SIZES\""
    for i in $(seq 0 $((REPLICAS - 1))); do
      echo "[[replicas]]"
      echo "name = \"r$i\""
      echo "address = \"127.0.0.1:${PORTS[$i]}\""
    done
    if [ -n "${BALLOT_CONFIG_TAIL:-}" ]; then printf '%b\n' "$BALLOT_CONFIG_TAIL"; fi
  } >"$RUN/balancer-$2.toml"
  "$BIN/balancer" --config "$RUN/balancer-$2.toml" --workers "$LB_THREADS" >"$RUN/$1-balancer.log" 2>&1 &
  PIDS+=($!)
  wait_line "$RUN/$1-balancer.log" "^listening on" $!
}

replay() { # out-prefix replay-args...: in the background, so INT/TERM act at once
  local out=$1
  shift
  "$BIN/ballot" replay "$@" --json "$out.json" >"$out.txt" 2>&1 &
  PIDS+=($!)
  if ! wait $!; then
    cat "$out.txt" >&2
    exit 1
  fi
  unset 'PIDS[${#PIDS[@]}-1]'
}

scrape_metrics() { # file: ballot's Prometheus metrics (routing reasons) from the admin port
  python3 -c '
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://127.0.0.1:$BALLOT_ADMIN/metrics" >"$1"
}

