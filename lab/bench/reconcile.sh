#!/usr/bin/env bash
# Benchmark: opctl reconcile against the naive single-statement SQL a DBA
# would write for the same questions, on the same generated data (lab/gen),
# at several sizes. Needs only MariaDB (its mariadb client) and go. Usage:
#
#   lab/bench/reconcile.sh                 # 200k and 2M operations
#   lab/bench/reconcile.sh 200000 2000000 5000000
#   SCHEMA=production lab/bench/reconcile.sh 200000 2000000 5000000
#
# Environment:
#
#   SCHEMA      lab (default): testdata/schema with the indexes `opctl
#               schema apply --indexes` adds (and, unless COVERING=0, the
#               (created_at, key) indexes of the duplicates and orphans
#               walks); production: the same tables keyed and indexed the
#               way their owners index them and nothing added
#               (lab/bench/production.sql: auto-increment ids, the business
#               keys only unique, (created_at) alone on the scan tables)
#   DAYS        the history, days (default 50): PER_DAY is N / DAYS
#   BENCH_DSN   the server, as a go-sql-driver DSN (default
#               root@tcp(127.0.0.1:3306)/: root, no password); opctl and
#               lab/gen get it with the benchmark's database, the mariadb
#               client -h/-P, -u and --password derived from it
#               (lab/bench/dsn.sh; startup.sh reads the same variable)
#   WINDOW_H    the window of the every-few-minutes job, hours (default 24)
#   KEEP        1: keep each size's database and manifest (in KEEP_DIR,
#               default /var/tmp/opctl_bench) after the run, and reuse them
#               instead of loading when both are there with the same SCHEMA
#               and DAYS (loading 2M operations takes minutes on 2 cores);
#               the anomalies age from the load on, so a reused database's
#               window runs find fewer of them as hours pass (the whole
#               history runs stay exact while the load is under a day old)
#   ONLY        whole: skip the window runs (the every-few-minutes job), only
#               the whole-history sweep and the naive statements
#   PAIRED      k: then k rounds of the whole-history sweep (all checks, one
#               run) and the 8 naive statements back to back, each pair at
#               about the same load (default 0)
#
# The data is what a production table looks like to a job that runs every
# few minutes: a steady N / DAYS operations a day over DAYS days, and the
# 0.1% seeded anomalies all in the newest WINDOW_H - 1 hours (the history
# before them is clean, as if reconciled by earlier runs).
#
# For each size it creates a database opctl_bench_<N> (dropped at the end),
# loads testdata/schema/{settlement,skip}.sql, adds the indexes reconcile
# needs (opctl schema apply --indexes --yes) and, unless COVERING=0, the
# (created_at, key) indexes that let the duplicates and orphans walks read
# only the index (the schemas' (created_at) index serves those walks too,
# with a row read per entry: docs/performance.md), loads N operations, and
# measures, for
#   reconcile, window         opctl reconcile --since ${WINDOW_H}h (all checks,
#                             then each --check; median of 3 runs each):
#                             the every-few-minutes job
#   reconcile, full history   opctl reconcile --since <history + 1 day> (all
#                             checks, then each --check; median of 3 runs
#                             each): a sweep over every row
#   naive skipped             SKIPPED JOIN orders ON status NOT cancelling AND
#                             NOT EXISTS points_grant (seed 003's query: no
#                             time bound), on seed 003's schema (IGNORE INDEX
#                             (ix_action_created): its table had only uk_msg_id)
#                             and with the index reconcile uses
#   naive skipped, windowed   the same with created_at >= NOW() - the window
#   naive stuck, evidence     the stuck statement with each step's evidence
#                             (what a verdict needs) for every row it finds
#   naive (all checks)        one statement per question: stuck, duplicates
#                             (GROUP BY ... HAVING per scan table), orphans
#                             (anti-join per scan table), skipped
# wall time, rows examined (sum of Handler_read_*: SHOW SESSION STATUS for
# the naive statements; the GLOBAL delta for reconcile, which uses several
# connections, so other activity on the server inflates it) and peak RSS of
# the client process (/usr/bin/time -v, else VmHWM from /proc). It checks
# that reconcile's targets equal the manifest's anomalies exactly, for the
# window run and for the full sweep.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=("$@")
[ ${#SIZES[@]} -eq 0 ] && SIZES=(200000 2000000)
SCHEMA=${SCHEMA:-lab}
case $SCHEMA in lab|production) ;; *) echo "$0: SCHEMA=$SCHEMA: want lab or production" >&2; exit 2;; esac
source lab/bench/dsn.sh
bench_dsn
MYSQL=("${CLIENT[@]}")
DAYS=${DAYS:-50}
WINDOW_H=${WINDOW_H:-24}
KEEP=${KEEP:-0}
KEEP_DIR=${KEEP_DIR:-/var/tmp/opctl_bench}
ONLY=${ONLY:-}
case $ONLY in ''|whole) ;; *) echo "$0: ONLY=$ONLY: want whole or nothing" >&2; exit 2;; esac
TMP=$(mktemp -d)
DBS=()
cleanup() {
  [ "$KEEP" = 1 ] || for d in "${DBS[@]:-}"; do [ -n "$d" ] && "${MYSQL[@]}" -e "DROP DATABASE IF EXISTS \`$d\`" || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

go build -o "$TMP/opctl" .
go build -o "$TMP/gen" ./lab/gen/cmd
go build -o "$TMP/compare" ./lab/bench/compare
# The config without its kafka block: no broker is running, and a run with
# Kafka "not configured" measures MySQL's share, not dial timeouts (the
# verdicts are partial and reconcile exits 6, as expected).
sed '/^kafka:/,/^pipelines:/{/^pipelines:/!d}' testdata/config/reconcile.yaml >"$TMP/reconcile.yaml"

# peak_rss CMD... : runs CMD, prints its peak RSS in MiB on fd 3, returns its exit code.
peak_rss() {
  if [ -x /usr/bin/time ]; then
    local rc=0
    /usr/bin/time -v -o "$TMP/time.txt" "$@" || rc=$?
    awk -F: '/Maximum resident set size/ {printf "%.1f\n", $2/1024}' "$TMP/time.txt" >&3
    return $rc
  fi
  "$@" & local pid=$! hwm=0 v
  while kill -0 $pid 2>/dev/null; do
    v=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || true)
    [ -n "$v" ] && hwm=$v
    sleep 0.1
  done
  local rc=0; wait $pid || rc=$?
  awk -v k="$hwm" 'BEGIN {printf "%.1f\n", k/1024}' >&3
  return $rc
}

handler_sum() { # scope
  "${MYSQL[@]}" -N -e "SHOW $1 STATUS LIKE 'Handler_read%'" | awk '{s+=$2} END {print s+0}'
}

now() { date +%s.%N; }

# naive DB LABEL SQL : runs one statement in one session, prints "label|secs|rows|rss".
naive() {
  local db=$1 label=$2 sql=$3 t0 t1 rows rss
  t0=$(now)
  rows=$( { peak_rss "${MYSQL[@]}" -N "$db" -e "FLUSH STATUS; $sql; SELECT 'HANDLER', SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME LIKE 'HANDLER_READ%';" 3>"$TMP/rss" ; } | awk '$1=="HANDLER" {print $2}')
  t1=$(now)
  rss=$(cat "$TMP/rss")
  printf '%s|%.2f|%s|%s\n' "$label" "$(echo "$t1 - $t0" | bc -l 2>/dev/null || awk "BEGIN{print $t1-$t0}")" "$rows" "$rss"
}

# recon DB LABEL ARGS... : runs opctl reconcile, prints "label|secs|rows|rss|exit".
recon() {
  local db=$1 label=$2; shift 2
  local h0 h1 t0 t1 rc=0
  h0=$(handler_sum GLOBAL); t0=$(now)
  peak_rss "$TMP/opctl" reconcile --config "$TMP/reconcile.yaml" --mysql-dsn "$(bench_db_dsn "$db")" \
    --timeout 30s "$@" -o jsonl >/dev/null 2>"$TMP/recon.err" 3>"$TMP/rss" || rc=$?
  t1=$(now); h1=$(handler_sum GLOBAL)
  printf '%s|%.2f|%s|%s|%s\n' "$label" "$(awk "BEGIN{print $t1-$t0}")" "$((h1 - h0))" "$(cat "$TMP/rss")" "$rc"
}

# recon3 DB LABEL ARGS... : recon three times, prints the run of median wall time.
recon3() {
  local db=$1 label=$2; shift 2
  { recon "$db" "$label" "$@"; recon "$db" "$label" "$@"; recon "$db" "$label" "$@"; } | sort -t'|' -k2,2n | sed -n 2p
}

RESULTS=()
PER_CHECK=()
LOADS=()
PAIRS=()
for n in "${SIZES[@]}"; do
  db="opctl_bench_$n"
  DBS+=("$db")
  days=$DAYS
  span=$(( days * 24 ))h
  aspan=$(( WINDOW_H - 1 ))h
  full=$(( days + 1 ))d
  kept="$KEEP_DIR/$db.$SCHEMA.${DAYS}d.manifest.json"
  if [ "$KEEP" = 1 ] && [ -s "$kept" ] && "${MYSQL[@]}" -N -e "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '$db'" | grep -q 1; then
    echo "== $n operations: reusing $db and $kept (KEEP=1, loaded $(date -r "$kept" -u '+%F %T UTC'))" >&2
    cp "$kept" "$TMP/manifest-$n.json"
  else
    echo "== $n operations: loading $db" >&2
    "${MYSQL[@]}" -e "DROP DATABASE IF EXISTS \`$db\`; CREATE DATABASE \`$db\`"
    "${MYSQL[@]}" "$db" < testdata/schema/settlement.sql
    "${MYSQL[@]}" "$db" < testdata/schema/skip.sql
    if [ "$SCHEMA" = production ]; then
      "${MYSQL[@]}" "$db" < lab/bench/production.sql
    else
      "$TMP/opctl" schema apply --indexes --yes --config testdata/config/reconcile.yaml --mysql-dsn "$(bench_db_dsn "$db")" >&2
      if [ "${COVERING:-1}" != 0 ]; then
        "${MYSQL[@]}" "$db" -e "ALTER TABLE balance_journal ADD INDEX ix_opctl_created_at_biz_id (created_at, biz_id);
          ALTER TABLE points_grant ADD INDEX ix_opctl_created_at_order_id (created_at, order_id)"
      fi
    fi
    "$TMP/gen" -dsn "$(bench_db_dsn "$db")" -ops "$n" -span "$span" -anomaly-span "$aspan" -manifest "$TMP/manifest-$n.json"
    "${MYSQL[@]}" "$db" -N -e "ANALYZE TABLE biz_operation, balance_journal, ledger_entry, step_intent, orders, consumer_idempotency, points_grant" >/dev/null
    if [ "$KEEP" = 1 ]; then
      mkdir -p "$KEEP_DIR"
      cp "$TMP/manifest-$n.json" "$kept"
    fi
  fi
  echo "== $n: reconcile ($days days of history)" >&2
  LOADS+=("$n operations: load average $(cut -d' ' -f1-3 /proc/loadavg) before reconcile")
  declare -A r_check exact_check f_check exact_fcheck
  r_all="skipped (ONLY=whole)|0|0|0|"; exact="not run"
  for c in stuck duplicates orphans skipped; do r_check[$c]="-|-|-|0|"; exact_check[$c]="- seeded, found, not run"; done
  if [ "$ONLY" != whole ]; then
    r_all=$(recon3 "$db" "reconcile, all checks, --since ${WINDOW_H}h (median of 3)" --since "${WINDOW_H}h" --out "$TMP/targets-$n.jsonl")
    exact=$("$TMP/compare" -manifest "$TMP/manifest-$n.json" -targets "$TMP/targets-$n.jsonl" || true)
    for c in stuck duplicates orphans skipped; do
      r_check[$c]=$(recon3 "$db" "reconcile --check $c --since ${WINDOW_H}h (median of 3)" --check "$c" --since "${WINDOW_H}h" --out "$TMP/$c-$n.jsonl")
      exact_check[$c]=$("$TMP/compare" -manifest "$TMP/manifest-$n.json" -targets "$TMP/$c-$n.jsonl" -check "$c" || true)
    done
  fi
  r_full=$(recon3 "$db" "reconcile, all checks, --since $full (whole history, median of 3)" --since "$full" --out "$TMP/full-$n.jsonl")
  exact_full=$("$TMP/compare" -manifest "$TMP/manifest-$n.json" -targets "$TMP/full-$n.jsonl" || true)
  for c in stuck duplicates orphans skipped; do
    f_check[$c]=$(recon3 "$db" "reconcile --check $c --since $full (median of 3)" --check "$c" --since "$full" --out "$TMP/f$c-$n.jsonl")
    exact_fcheck[$c]=$("$TMP/compare" -manifest "$TMP/manifest-$n.json" -targets "$TMP/f$c-$n.jsonl" -check "$c" || true)
  done

  echo "== $n: naive SQL" >&2
  LOADS+=("$n operations: load average $(cut -d' ' -f1-3 /proc/loadavg) before the naive statements")
  SKIP="SELECT i.msg_id, i.biz_id FROM consumer_idempotency i %s JOIN orders o ON o.order_id = i.biz_id
        WHERE i.action = 'SKIPPED' AND o.status NOT IN ('REFUNDED', 'CANCELLED')
        AND NOT EXISTS (SELECT 1 FROM points_grant g WHERE g.order_id = i.biz_id)"
  n_skip=$(naive "$db" "naive skipped" "$(printf "$SKIP" "")")
  n_seed=$(naive "$db" "naive skipped, seed 003 schema" "$(printf "$SKIP" "IGNORE INDEX (ix_action_created)")")
  n_seed_w=$(naive "$db" "naive skipped, seed 003 schema, created_at in the window" "$(printf "$SKIP" "IGNORE INDEX (ix_action_created)") AND i.created_at >= NOW() - INTERVAL $WINDOW_H HOUR")
  n_skip_w=$(naive "$db" "naive skipped, created_at in the window, with the index" "$(printf "$SKIP" "") AND i.created_at >= NOW() - INTERVAL $WINDOW_H HOUR")
  # The stuck question with what a verdict needs: each stuck operation's
  # state row and what each of its steps left (reconcile's stuck targets
  # carry the verdict; the bare list below does not).
  n_stuck_ev=$(naive "$db" "naive stuck, with each step's evidence" "SELECT s.biz_id, s.status, s.updated_at, s.lease_until,
      (SELECT COUNT(*) FROM balance_journal j WHERE j.biz_id = s.biz_id AND j.kind = 'DEBIT'
        AND NOT EXISTS (SELECT 1 FROM balance_journal r WHERE r.biz_id = j.biz_id AND r.kind = 'REVERSAL' AND r.reverses_id = j.id)) AS debits,
      (SELECT COUNT(*) FROM ledger_entry l WHERE l.biz_order_id = s.biz_id) AS ledger_rows,
      (SELECT COUNT(*) FROM step_intent i WHERE i.biz_id = s.biz_id AND i.step = 'notify') AS intents
    FROM biz_operation s WHERE s.status NOT IN ('DONE','FAILED') AND s.updated_at < NOW() - INTERVAL 5 MINUTE
      AND (s.lease_until IS NULL OR s.lease_until < NOW())")
  # One question a statement, as a DBA would ask it (no time bound), on the
  # same indexes; the check each one answers.
  n_all_t=0; n_all_rows=0; n_all_rss=0
  NAIVE_ALL=()
  declare -A n_t n_rows
  for q in \
    "stuck|SELECT biz_id FROM biz_operation WHERE status NOT IN ('DONE','FAILED') AND updated_at < NOW() - INTERVAL 5 MINUTE AND (lease_until IS NULL OR lease_until < NOW())" \
    "duplicates|SELECT biz_id FROM balance_journal WHERE kind = 'DEBIT' GROUP BY biz_id HAVING COUNT(*) > 1" \
    "duplicates|SELECT biz_order_id FROM ledger_entry GROUP BY biz_order_id HAVING COUNT(*) > 1" \
    "duplicates|SELECT order_id FROM points_grant GROUP BY order_id HAVING COUNT(*) > 1" \
    "orphans|SELECT DISTINCT j.biz_id FROM balance_journal j LEFT JOIN biz_operation s ON s.biz_id = j.biz_id WHERE s.biz_id IS NULL" \
    "orphans|SELECT DISTINCT l.biz_order_id FROM ledger_entry l LEFT JOIN biz_operation s ON s.biz_id = l.biz_order_id WHERE s.biz_id IS NULL" \
    "orphans|SELECT DISTINCT g.order_id FROM points_grant g LEFT JOIN consumer_idempotency i ON i.biz_id = g.order_id WHERE i.biz_id IS NULL" \
    "skipped|$(printf "$SKIP" "")"; do
    NAIVE_ALL+=("${q#*|}")
    c=${q%%|*}
    IFS='|' read -r _ t rows rss <<<"$(naive "$db" q "${q#*|}")"
    n_t[$c]=$(awk "BEGIN{print ${n_t[$c]:-0}+$t}"); n_rows[$c]=$(( ${n_rows[$c]:-0} + rows ))
    n_all_t=$(awk "BEGIN{print $n_all_t+$t}"); n_all_rows=$((n_all_rows + rows))
    n_all_rss=$(awk "BEGIN{print ($rss>$n_all_rss)?$rss:$n_all_rss}")
  done
  n_all="naive (all checks, 8 statements)|$n_all_t|$n_all_rows|$n_all_rss"

  # PAIRED=k: k more rounds of the whole-history sweep (all checks, one
  # run) and the 8 naive statements back to back, so that each pair ran at
  # about the same load (the machine may be shared).
  for ((round = 1; round <= ${PAIRED:-0}; round++)); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    IFS='|' read -r _ rt rrows _ _ <<<"$(recon "$db" pair --since "$full" --out "$TMP/pair-$n.jsonl")"
    pexact=$("$TMP/compare" -manifest "$TMP/manifest-$n.json" -targets "$TMP/pair-$n.jsonl" || true)
    nt=0; nrows=0
    for q in "${NAIVE_ALL[@]}"; do
      IFS='|' read -r _ t rows _ <<<"$(naive "$db" q "$q")"
      nt=$(awk "BEGIN{print $nt+$t}"); nrows=$((nrows + rows))
    done
    PAIRS+=("$n|$round|$load|$rt|$rrows|$nt|$nrows|$(cut -d' ' -f1 /proc/loadavg)|${pexact%% seeded*}: ${pexact#*found, }")
  done

  [ "$ONLY" = whole ] || RESULTS+=("$n|$r_all|$exact")
  RESULTS+=("$n|$r_full|$exact_full"
    "$n|$n_seed|" "$n|$n_skip|" "$n|$n_seed_w|" "$n|$n_skip_w|" "$n|$n_stuck_ev|" "$n|$n_all|")
  for c in stuck duplicates orphans skipped; do
    IFS='|' read -r _ t rows rss _ <<<"${r_check[$c]}"
    IFS='|' read -r _ ft frows frss _ <<<"${f_check[$c]}"
    PER_CHECK+=("$n|$c|$t|$rows|$ft|$frows|${n_t[$c]}|${n_rows[$c]}|$(awk "BEGIN{print ($rss>$frss)?$rss:$frss}")|${exact_check[$c]%% seeded*}: ${exact_check[$c]#*found, }|${exact_fcheck[$c]%% seeded*}: ${exact_fcheck[$c]#*found, }")
  done
  [ "$KEEP" = 1 ] || "${MYSQL[@]}" -e "DROP DATABASE IF EXISTS \`$db\`"
done

echo
echo "SCHEMA=$SCHEMA; $DAYS days of history; the anomalies in the newest $((WINDOW_H - 1)) hours; MariaDB $("${MYSQL[@]}" -N -e 'SELECT VERSION()'), buffer pool $("${MYSQL[@]}" -N -e 'SELECT @@innodb_buffer_pool_size DIV 1048576') MiB; $(nproc) cores"
printf '%s\n' "${LOADS[@]}" "load average at the end $(cut -d' ' -f1-3 /proc/loadavg) (the machine may be shared: compare runs at similar load)"
echo "| operations | run | wall s | rows examined | peak RSS MiB | exit | exact? |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | --- |"
for r in "${RESULTS[@]}"; do
  IFS='|' read -r n label t rows rss a b <<<"$r"
  if [[ "$label" == reconcile* ]]; then
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$label" "$t" "$rows" "$rss" "$a" "$b"
  else
    printf '| %s | %s | %s | %s | %s (client) | | |\n' "$n" "$label" "$t" "$rows" "$rss"
  fi
done

echo
echo "Per question: reconcile --check C, --since ${WINDOW_H}h and over the whole history (median of 3 each), against the naive statements of the same question (no time bound, same indexes)"
echo "| operations | check | ${WINDOW_H}h s | ${WINDOW_H}h rows | whole s | whole rows | naive s | naive rows | naive / ${WINDOW_H}h | naive / whole | RSS MiB | exact ${WINDOW_H}h | exact whole |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for r in "${PER_CHECK[@]}"; do
  IFS='|' read -r n c t rows ft frows nt nrows rss ex fex <<<"$r"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s× | %s× | %s | %s | %s |\n' "$n" "$c" "$t" "$rows" "$ft" "$frows" "$nt" "$nrows" \
    "$([ "$t" = - ] && echo - || awk "BEGIN{printf \"%.1f\", $nt/($t>0?$t:0.01)}")" "$(awk "BEGIN{printf \"%.2f\", $nt/($ft>0?$ft:0.01)}")" "$rss" "$ex" "$fex"
done

if [ ${#PAIRS[@]} -gt 0 ]; then
  echo
  echo "Back to back (PAIRED): reconcile, all checks, --since $(( DAYS + 1 ))d in one run, then the 8 naive statements"
  echo "| operations | round | load before | reconcile s | reconcile rows | naive s | naive rows | load after | reconcile / naive s | reconcile / naive rows | exact |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  for r in "${PAIRS[@]}"; do
    IFS='|' read -r n round l0 rt rrows nt nrows l1 ex <<<"$r"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$round" "$l0" "$rt" "$rrows" "$nt" "$nrows" "$l1" \
      "$(awk "BEGIN{printf \"%.2f\", $rt/($nt>0?$nt:0.01)}")" "$(awk "BEGIN{printf \"%.2f\", $rrows/($nrows>0?$nrows:1)}")" "$ex"
  done
fi
