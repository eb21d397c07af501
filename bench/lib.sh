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
