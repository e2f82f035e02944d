# shellcheck shell=bash
# Sourced by .ci/run, dist/action-test, dist/check and
# dist/gitlab-component-test: a throwaway redis-server on loopback whose
# files live in $work, and the cleanup that removes $work.
: "${work:?the sourcing script sets work to its scratch directory}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts the server in $work and sets $port. Every write synced: redlock
# lets a fresh server vote at once (without persistence it may have lost a
# holder's lock, and waits --max-ttl + 1 s).
start_redis() {
  port=$(free_port)
  /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
    --dir "$work" --logfile "$work/redis.log" --daemonize yes --pidfile "$work/redis.pid"
  for _ in $(seq 100); do
    [[ -s $work/redis.pid ]] && /usr/bin/redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
}

# Kills the processes given and the server, waits until the server has
# exited (at most 10 s), then removes $work.
# Why wait: Redis writes into $work until it exits: it opens its log file
# anew for every line and writes several between SIGTERM and its exit (its
# shutdown runs on the next cron tick, 100 ms later), and it syncs its AOF.
# A `rm -rf` beside those lines deleted redis.log, then could not remove
# $work, where Redis had just made the file again, and the EXIT trap's
# failure failed CI (the run of 98ff8f7; .ci/run's own copy, once before).
stop_all() {
  local redis_pid
  redis_pid=$(cat "$work/redis.pid" 2>/dev/null) || true
  kill "$@" 2>/dev/null || true
  if [[ -n $redis_pid ]]; then
    kill "$redis_pid" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -rf "$work"
}
