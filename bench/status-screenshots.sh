#!/usr/bin/env bash
# Screenshots of the balancer's status page in headless Chromium during the live AOL demo's
# table run, and after a replica of that run is killed: docs/status-table-run.png and
# docs/status-replica-killed.png (issue 32).
#
# Runs `ballot demo` on the AOL log with only the table live (more saturation queries than
# the default, so the run lasts long enough), its balancer's admin API opened by
# BALLOT_ADMIN_TOKEN (the demo writes `admin_token_env` into its config when the variable is
# set). SHOT_AFTER seconds into the table's closed-loop run the first screenshot is taken;
# then the replica r3 is SIGKILLed, and KILL_WAIT seconds later (its ejection takes two
# failed health checks, 0.5 s apart; the page's figures span 15 s) the second. The demo then ends with a replica missing,
# so its report is not a result; the demo's own numbers come from its unkilled runs
# (docs/results.md). Between the two, `/admin/explain` on a few queries goes to
# OUT/explain-live.txt.
#
# Not part of CI. Needs BALLOT_DATA (default ../shared/data), root (or sudo) for apt when
# Chromium is missing, and npm for playwright-core (installed into OUT). Knobs: OUT
# (target/status-shots), SHOT_AFTER (40), KILL_WAIT (20), SATURATE (30000), SKIP_BUILD=1,
# BIN_DIR (target/release), DOCS (docs: where the PNGs go).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. bench/lib.sh

DATA=${BALLOT_DATA:-$ROOT/../shared/data}
OUT=${OUT:-$ROOT/target/status-shots}
SHOT_AFTER=${SHOT_AFTER:-40}
KILL_WAIT=${KILL_WAIT:-20}
SATURATE=${SATURATE:-30000}
BIN=${BIN_DIR:-$ROOT/target/release}
DOCS=${DOCS:-$ROOT/docs}

if ! command -v chromium >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update && $SUDO apt-get install -y chromium
fi
mkdir -p "$OUT"
if [ ! -d "$OUT/node_modules/playwright-core" ]; then
  (cd "$OUT" && npm install --no-audit --no-fund playwright-core@1 >/dev/null)
fi
cp bench/status-shot.mjs "$OUT/"
[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release -p pipelines

BALLOT_ADMIN_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export BALLOT_ADMIN_TOKEN
DEMO=$OUT/demo
rm -rf "$DEMO"
"$BIN/ballot" demo --log "$DATA/aol-2006-1m-queries.txt.gz" \
  --freq "$DATA/wordfreq-large-en.tsv.gz" --out "$DEMO" \
  --live-policies table --live-saturate "$SATURATE" >"$OUT/demo.log" 2>&1 &
DEMO_PID=$!
PIDS+=("$DEMO_PID")
trap stop_all EXIT

# The table's balancer prints its admin address when it starts (after the offline part).
LOG=""
for _ in $(seq 1 1200); do
  LOG=$(find "$DEMO" -name 'balancer-table.log' 2>/dev/null | head -1 || true)
  [ -n "$LOG" ] && grep -q '^admin on ' "$LOG" && break
  kill -0 "$DEMO_PID" 2>/dev/null || { tail -20 "$OUT/demo.log" >&2; exit 1; }
  sleep 0.5
done
[ -n "$LOG" ] || { echo "the demo started no table balancer" >&2; exit 1; }
ADMIN="http://$(sed -n 's/^admin on //p' "$LOG" | head -1)"
echo "table balancer admin: $ADMIN; first screenshot in $SHOT_AFTER s"
sleep "$SHOT_AFTER"
(cd "$OUT" && node status-shot.mjs "$ADMIN" "$BALLOT_ADMIN_TOKEN" "$DOCS/status-table-run.png")

# How the live balancer routes a few queries right now (rules under load included).
for q in google "weather+channel" "zzkq+flurble" "myspace+layouts" "bank+of+america"; do
  curl -s -H "Authorization: Bearer $BALLOT_ADMIN_TOKEN" \
    "$ADMIN/admin/explain?q=$q&format=text" || true
  echo
done >"$OUT/explain-live.txt"

VICTIM=$(pgrep -f -- "replica --index $DEMO.* --id r3( |$)" | head -1 || true)
[ -n "$VICTIM" ] || { echo "no replica r3 of the demo found" >&2; exit 1; }
kill -9 "$VICTIM"
echo "killed replica r3 (pid $VICTIM); second screenshot in $KILL_WAIT s"
sleep "$KILL_WAIT"
(cd "$OUT" && node status-shot.mjs "$ADMIN" "$BALLOT_ADMIN_TOKEN" "$DOCS/status-replica-killed.png")
curl -s -H "Authorization: Bearer $BALLOT_ADMIN_TOKEN" "$ADMIN/admin/replicas" \
  >"$OUT/replicas-after-kill.json" || true
echo "screenshots: $DOCS/status-table-run.png $DOCS/status-replica-killed.png"
