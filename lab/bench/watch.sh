#!/usr/bin/env bash
# Benchmark: `opctl watch` under a steady load of the lab's consumers,
# against `opctl reconcile` run as a 5-minute cron on the same load
# (docs/performance.md, "watch"). One run per mode, on this machine:
#
#   lab/bench/watch.sh                  # MODE=poll
#   MODE=binlog lab/bench/watch.sh
#   RATES=300,400 DURATION=150s lab/bench/watch.sh
#
# Needs go and the MariaDB server binaries (mariadbd, mariadb-install-db):
# it starts a private MariaDB with a ROW binlog (nothing else on it, so its
# counters are the benchmark's), the lab's in-process Kafka cluster and
# downstream services, and the lab's consumers (lab/bench/watch/main.go
# says what runs). Environment:
#
#   MODE        poll (default) or binlog: the source the watch follows.
#   RATES       the ladder of total rates, operations/s (default
#               50,100,150,200,300,400,500): each is run STEP long with
#               the watch running; the highest at which the consumers keep
#               up (backlog under a second of load at the end, drained
#               after) and the watch meets its target (every incident of
#               the step flagged, p99 within INTERVAL + 1 s polling, 1 s
#               binlog) is measured for DURATION (the lowest when none is)
#   STEP        default 20s
#   DURATION    the measured run (default 150s)
#   INTERVAL    watch --interval (default 1s)
#   OLDER_THAN  watch and reconcile --older-than (default 5s)
#   OUT         keep the events, the watch's stderr and the configs here
#               (default: a temporary directory, removed)
#   PROFILE     a directory: opctl is built with -tags pprof and each of
#               its processes writes a CPU profile of its first
#               PROFILE_SECONDS (default 60) to PROFILE/opctl.cpu.PID and
#               its allocations beside it (.heap); read them with
#               go tool pprof -top BINARY FILE (docs/performance.md)
#
# It prints the summary (JSON on stdout, the table on stderr) and the
# machine's uptime before and after: the machine may be shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=${MODE:-poll}
case $MODE in
  poll) DEFAULT_ARGS="--source poll" ;;
  binlog) DEFAULT_ARGS="--source binlog" ;;
  *) echo "$0: MODE=$MODE: want poll or binlog" >&2; exit 2 ;;
esac
WATCH_ARGS=${WATCH_ARGS-$DEFAULT_ARGS}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ -n "${PROFILE:-}" ]; then
  mkdir -p "$PROFILE"
  go build -tags pprof -o "$PROFILE/opctl" .
  cp "$PROFILE/opctl" "$TMP/opctl"
  export OPCTL_CPUPROFILE="$(cd "$PROFILE" && pwd)/opctl.cpu" OPCTL_PROFILE_SECONDS="${PROFILE_SECONDS:-60}"
else
  go build -o "$TMP/opctl" .
fi
go build -o "$TMP/watchbench" ./lab/bench/watch
echo "uptime before: $(uptime)" >&2
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')" >&2
"$TMP/watchbench" -opctl "$TMP/opctl" -mode "$MODE" -watch-args "$WATCH_ARGS" \
  -rates "${RATES:-50,100,150,200,300,400,500}" -step "${STEP:-20s}" -duration "${DURATION:-150s}" \
  -interval "${INTERVAL:-1s}" -older-than "${OLDER_THAN:-5s}" ${OUT:+-out "$OUT"}
echo "uptime after: $(uptime)" >&2
