# lab/bench/dsn.sh: the server of the benchmarks, sourced by startup.sh and
# reconcile.sh (from the module root).
#
#   BENCH_DSN   the MariaDB/MySQL server, as a go-sql-driver DSN
#               (user[:password]@tcp(host:port)/ or user@unix(/path)/;
#               default root@tcp(127.0.0.1:3306)/, root without a password).
#               Its database name is ignored: each script makes its own.
#               opctl and the lab get it as it is; the mariadb client gets
#               -h/-P (or --socket), -u and --password derived from it.
#
# bench_dsn parses BENCH_DSN and sets
#   CLIENT             the mariadb client command for that server (an array)
#   BENCH_DSN_SERVER   BENCH_DSN up to its "/" (user[:password]@tcp(host:port))
#   BENCH_DSN_PARAMS   its parameters ("?..." or empty)
# bench_db_dsn DB prints BENCH_DSN with database DB.

BENCH_DSN=${BENCH_DSN:-root@tcp(127.0.0.1:3306)/}

bench_dsn() {
  local re='^((.*)@)?((tcp|unix)\(([^)]*)\))?/([^?]*)(\?.*)?$'
  if ! [[ $BENCH_DSN =~ $re ]]; then
    # Not printed: it may hold a password.
    echo "$0: BENCH_DSN is not a DSN like user[:password]@tcp(host:port)/" >&2
    exit 2
  fi
  local cred=${BASH_REMATCH[2]} proto=${BASH_REMATCH[4]:-tcp} addr=${BASH_REMATCH[5]}
  BENCH_DSN_SERVER="${BASH_REMATCH[1]}${BASH_REMATCH[3]}"
  BENCH_DSN_PARAMS=${BASH_REMATCH[7]}
  local user=${cred%%:*} pass=""
  [[ $cred == *:* ]] && pass=${cred#*:}
  CLIENT=(mariadb)
  [ -n "$user" ] && CLIENT+=(-u "$user")
  [ -n "$pass" ] && CLIENT+=("--password=$pass")
  if [ "$proto" = unix ]; then
    CLIENT+=("--socket=$addr")
    return
  fi
  [ -z "$addr" ] && addr=127.0.0.1:3306
  local host=$addr port=3306
  if [[ $addr =~ ^(.*):([0-9]+)$ ]]; then
    host=${BASH_REMATCH[1]} port=${BASH_REMATCH[2]}
  fi
  host=${host#\[}
  host=${host%\]}
  CLIENT+=(--protocol=TCP -h "$host" -P "$port")
}

bench_db_dsn() { printf '%s/%s%s' "$BENCH_DSN_SERVER" "$1" "$BENCH_DSN_PARAMS"; }
