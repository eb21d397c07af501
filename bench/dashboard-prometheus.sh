#!/usr/bin/env bash
# The Grafana dashboard's queries on a real Prometheus (Debian's `prometheus`, installed with
# apt when missing): REPLICAS ballot replicas and ballot's balancer (table policy, work from
# shadow caches) on loopback, a Prometheus scraping all of them every second, an open-loop
# replay through the balancer (QUERIES at RATE, and one request without a query), then every
# query of ops/grafana/ballot.json evaluated through Prometheus' HTTP API. Exits 1 naming each
# query that Prometheus refuses or that returns no series; prints each query's series count.
#
# Knobs (environment): REPLICAS (2), QUERIES (2000), RATE (100/s), BASE_PORT (18700:
# replicas from BASE_PORT+1, the balancer BASE_PORT+60/61, Prometheus BASE_PORT+90),
# DASHBOARD (ops/grafana/ballot.json), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REPLICAS=${REPLICAS:-2}
QUERIES=${QUERIES:-2000}
RATE=${RATE:-100}
BASE_PORT=${BASE_PORT:-18700}
PROM_PORT=$((BASE_PORT + 90))
BALLOT_PORT=$((BASE_PORT + 60))
BALLOT_ADMIN=$((BASE_PORT + 61))
PORTS=()
for i in $(seq 0 $((REPLICAS - 1))); do PORTS+=($((BASE_PORT + 1 + i))); done
DASHBOARD=${DASHBOARD:-$ROOT/ops/grafana/ballot.json}

command -v prometheus >/dev/null || { apt-get update && apt-get install -y --no-install-recommends prometheus; }
for tool in jq curl; do
  command -v "$tool" >/dev/null || { echo "dashboard-prometheus: $tool is needed" >&2; exit 1; }
done
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p pipelines -p balancer-ops -p replica
fi
BIN=$ROOT/target/release

RUN=$(mktemp -d)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
trap 'stop_all; rm -rf "$RUN"' EXIT
trap 'exit 130' INT TERM

# A small index, and a table trained for it on the same synthetic log.
INDEX=$RUN/index
SIZES=$INDEX/sizes.parquet
TABLE=$RUN/table.parquet
"$BIN/ballot" build-index --synth-queries 4000 --docs 20000 -o "$INDEX" >/dev/null
"$BIN/ballot" train --synth-queries 4000 --sizes "$SIZES" --replicas "$REPLICAS" \
  -o "$TABLE" >"$RUN/train.log" 2>&1 || { cat "$RUN/train.log" >&2; exit 1; }

CACHE_BYTES=1000000 EVICTION=sieve FLASH_MBPS=50 FLASH_US=100
start_replicas dash
EPS=0.05 BALLOT_LOAD=work LB_THREADS=1
BALLOT_CONFIG_EXTRA='work_source = "shadow"'
BALLOT_CONFIG_TAIL="[shadow]\ncache_bytes = $CACHE_BYTES"
start_ballot dash table

{
  echo "global: {scrape_interval: 1s, evaluation_interval: 1s}"
  echo "scrape_configs:"
  echo "  - job_name: balancer"
  echo "    authorization: {type: Bearer, credentials: bench}"
  echo "    static_configs: [{targets: ['127.0.0.1:$BALLOT_ADMIN']}]"
  echo "  - job_name: replicas"
  echo "    static_configs: [{targets: [$(for p in "${PORTS[@]}"; do printf "'127.0.0.1:%s'," "$p"; done | sed 's/,$//')]}]"
} >"$RUN/prometheus.yml"
prometheus --config.file="$RUN/prometheus.yml" --storage.tsdb.path="$RUN/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$RUN/prometheus.log" 2>&1 &
PIDS+=($!)
wait_port "$PROM_PORT" "$RUN/prometheus.log" $!

query() { # PromQL -> Prometheus' JSON answer
  curl -sfG "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}
# Every target up before the load, so rates see its start.
for _ in $(seq 1 100); do
  up=$(query 'sum(up)' | jq -r '.data.result[0].value[1] // 0')
  [ "$up" = $((REPLICAS + 1)) ] && break
  sleep 0.2
done
[ "$up" = $((REPLICAS + 1)) ] || { echo "Prometheus sees $up of $((REPLICAS + 1)) targets up" >&2; cat "$RUN/prometheus.log" >&2; exit 1; }

replay "$RUN/replay" --target "http://127.0.0.1:$BALLOT_PORT" --synth-queries 4000 \
  --part all --queries "$QUERIES" --rate "$RATE"
curl -s -o /dev/null "http://127.0.0.1:$BALLOT_PORT/search" # a client error, counted
sleep 3 # two more scrapes

failed=0
while IFS= read -r expr; do
  answer=$(query "$expr") || { echo "REFUSED: $expr" >&2; failed=1; continue; }
  series=$(jq '.data.result | length' <<<"$answer")
  printf '%3s series  %s\n' "$series" "$expr"
  if [ "$series" = 0 ]; then
    echo "NO SERIES: $expr" >&2
    failed=1
  fi
done < <(jq -r '.panels[].targets[]?.expr' "$DASHBOARD")
if [ "$failed" != 0 ]; then
  echo "dashboard-prometheus: some queries failed (above)" >&2
  exit 1
fi
echo "every dashboard query answered with data"
