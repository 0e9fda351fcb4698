#!/usr/bin/env bash
# Benchmark: how fast opctl answers, whole process, start to exit.
#
#   lab/bench/startup.sh            # 300 runs each (RUNS=...)
#
# Needs go, hyperfine, kcat, the mariadb client and MariaDB. Environment:
#
#   RUNS        hyperfine runs of each fast command (default 300)
#   BENCH_DSN   the server, as a go-sql-driver DSN (default
#               root@tcp(127.0.0.1:3306)/: root, no password); the lab runs
#               on it and the by-hand side's mariadb client gets -h/-P, -u and
#               --password derived from it (lab/bench/dsn.sh; reconcile.sh
#               reads the same variable)
#
# It measures, with hyperfine (median of RUNS runs after warm-up):
#
#   hello-world               a Go program that prints one line: the floor
#   opctl version             start-up alone
#   opctl where (one pipeline)  `opctl where PAY-D-1 --pipeline settlement
#                             -o json` on the lab's seed 000 incident: the state
#                             row, three steps (one probed downstream), the
#                             audit, the group view and the message read back
#   by hand                   the same facts read the way an operator does it
#                             today: the mariadb client for the state row,
#                             each step's evidence and the audit, curl for the
#                             downstream, kcat for the message and the
#                             partition's bounds. kcat cannot read a group's
#                             committed offset (kafka-consumer-groups.sh, a
#                             JVM, would add about a second), so by hand is
#                             missing that fact: a lower bound.
#
# The incident comes from the lab on MariaDB: lab/demo --mysql-dsn ... --keep
# --no-repair --scenario settlement-double-debit, stopped at the end. It also
# prints the binary's size and its package count (go list -deps .).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-300}
source lab/bench/dsn.sh
bench_dsn
TMP=$(mktemp -d)
DEMO_PID=""
cleanup() {
  [ -n "$DEMO_PID" ] && kill -INT "$DEMO_PID" 2>/dev/null && wait "$DEMO_PID" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

for tool in hyperfine kcat mariadb curl; do
  command -v "$tool" >/dev/null || { echo "startup.sh: needs $tool" >&2; exit 1; }
done

go build -o "$TMP/opctl" .
go build -o "$TMP/demo" ./lab/demo
mkdir -p "$TMP/hello"
cat > "$TMP/hello/main.go" <<'EOF'
package main

import "fmt"

func main() { fmt.Println("hello") }
EOF
(cd "$TMP/hello" && printf 'module hello\ngo 1.26\n' > go.mod && go build -o "$TMP/hello-world" .)

echo "binary: $(stat -c %s "$TMP/opctl") bytes; $(go list -deps . | wc -l) packages (go list -deps .)"

# The lab: the seed 000 incident on MariaDB and kfake, kept up.
(cd "$TMP" && exec ./demo --mysql-dsn "$BENCH_DSN" --keep --no-repair --scenario settlement-double-debit -o json > demo.json 2> demo.err) &
DEMO_PID=$!
for _ in $(seq 1 120); do [ -s "$TMP/opctl-lab.yaml" ] && break; sleep 0.5; done
[ -s "$TMP/opctl-lab.yaml" ] || { echo "startup.sh: the lab did not come up" >&2; cat "$TMP/demo.err" >&2; exit 1; }
CFG="$TMP/opctl-lab.yaml"

# What the manual sequence needs: the database, a broker, the notify URL,
# and the message's stored position (read once; an operator would look it up).
db=$(sed -n 's/.*dsn: ".*\/\([^?"]*\).*/\1/p' "$CFG" | head -1)
broker=$(sed -n 's/.*brokers: \["\([^"]*\)".*/\1/p' "$CFG" | head -1)
notify=$(sed -n 's/.*probe: "\(http:\/\/[^/]*\)\/effects?biz_id={biz_id}".*/\1/p' "$CFG" | head -1)
read -r part off < <("${CLIENT[@]}" -N -e "SELECT src_partition, src_offset FROM biz_operation WHERE biz_id = 'PAY-D-1'" "$db")
# The client as by-hand.sh runs it: the same server as the lab's (BENCH_DSN).
client=$(printf '%q ' "${CLIENT[@]}")
cat > "$TMP/by-hand.sh" <<EOF
#!/usr/bin/env bash
set -e
$client -N -e "SELECT status, version, src_partition, src_offset, msg_id, created_at, updated_at, NOW(6) FROM biz_operation WHERE biz_id = 'PAY-D-1'" $db
$client -N -e "SELECT j.id, j.account_id, j.delta, j.created_at FROM debit_log j WHERE j.biz_id = 'PAY-D-1' AND j.kind = 'DEBIT' AND NOT EXISTS (SELECT 1 FROM debit_log r WHERE r.kind = 'REVERSAL' AND r.reverses_id = j.id)" $db
$client -N -e "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = 'PAY-D-1'" $db
$client -N -e "SELECT plan_id, action_index, action, outcome FROM opctl_audit WHERE biz_id = 'PAY-D-1'" $db 2>/dev/null || true
curl -s "$notify/effects?biz_id=PAY-D-1"
kcat -b $broker -C -t settlement-event -p $part -o $off -c 1 -e -q -f '%k %h %s\n'
kcat -b $broker -Q -t settlement-event:$part:-2 -t settlement-event:$part:-1
EOF
chmod +x "$TMP/by-hand.sh"
"$TMP/opctl" --config "$CFG" where PAY-D-1 --pipeline settlement -o json > "$TMP/where.json" || true
grep -q '"code": "DUPLICATE_EFFECT"' "$TMP/where.json" || { echo "startup.sh: where PAY-D-1 is not DUPLICATE_EFFECT" >&2; cat "$TMP/where.json" >&2; exit 1; }
"$TMP/by-hand.sh" > "$TMP/by-hand.out"

hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$TMP/fast.json" \
  -n hello-world "$TMP/hello-world" \
  -n "opctl version" "$TMP/opctl version" \
  -n "opctl where (one pipeline)" -i "$TMP/opctl --config $CFG where PAY-D-1 --pipeline settlement -o json" >/dev/null
hyperfine --warmup 3 --runs $((RUNS / 10 > 10 ? RUNS / 10 : 10)) --export-json "$TMP/slow.json" \
  -n "by hand (mariadb x4, curl, kcat x2)" "$TMP/by-hand.sh" >/dev/null

python3 - "$TMP/fast.json" "$TMP/slow.json" <<'EOF'
import json, sys
rows = []
for f in sys.argv[1:]:
    for r in json.load(open(f))["results"]:
        rows.append((r["command"], r["median"] * 1000, len(r["times"])))
where = next(m for c, m, _ in rows if c.startswith("opctl where"))
print("| command | median ms | runs |")
print("| --- | ---: | ---: |")
for c, m, n in rows:
    print(f"| {c} | {m:.2f} | {n} |")
hand = next(m for c, m, _ in rows if c.startswith("by hand"))
print(f"\nopctl where is {hand / where:.1f}x faster than by hand")
EOF
