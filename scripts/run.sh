#!/usr/bin/env bash
# Start the Tidemark console and everything it needs, then wait: the web server, two
# Celery workers (the default queue and the alerts queue) and Celery beat (the store's upkeep and the monitoring), and a private
# redis-server under var/redis/ when no Redis answers at REDIS_URL.
# Ctrl-C or SIGTERM stops every process this script started; so does any one of
# them exiting on its own.
#
# To add a process (Celery worker, beat, demo traffic...), add one `start NAME CMD...`
# line in the "Processes" section below; shutdown handles it automatically.
set -euo pipefail
cd "$(dirname "$0")/.."

# Optional local overrides: variables from .env (see .env.example).
if [[ -f .env ]]; then
    set -a
    # shellcheck disable=SC1091
    . ./.env
    set +a
fi

PY=${PY:-.venv/bin/python}
CELERY=${CELERY:-$(dirname "$PY")/celery}
# A workstation: Django's debug mode on, explicitly (the settings' default is off).
export DEBUG=${DEBUG:-true}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
HOST=${TIDEMARK_HOST:-127.0.0.1}
PORT=${TIDEMARK_PORT:-8000}
STOP_GRACE_SECONDS=${STOP_GRACE_SECONDS:-10}

pids=()
names=()

# start NAME CMD...: run CMD in the background and remember it for shutdown.
start() {
    local name=$1
    shift
    "$@" &
    pids+=("$!")
    names+=("$name")
    echo "run.sh: started $name (pid $!)"
}

# stop_some SERVICES|REST: stop the started processes named redis (SERVICES: what the
# others need, so they go last) or every other one (REST): SIGTERM, a grace period,
# then SIGKILL.
stop_some() {
    local which=$1 i pid alive deadline
    local chosen=()
    for i in "${!pids[@]}"; do
        if { [[ ${names[$i]} == redis ]] && [[ $which == SERVICES ]]; } ||
            { [[ ${names[$i]} != redis ]] && [[ $which == REST ]]; }; then
            chosen+=("$i")
        fi
    done
    for i in "${chosen[@]}"; do
        pid=${pids[$i]}
        if kill -0 "$pid" 2>/dev/null; then
            echo "run.sh: stopping ${names[$i]} (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    deadline=$((SECONDS + STOP_GRACE_SECONDS))
    while ((SECONDS < deadline)); do
        alive=0
        for i in "${chosen[@]}"; do
            if kill -0 "${pids[$i]}" 2>/dev/null; then alive=1; fi
        done
        ((alive)) || break
        sleep 0.2
    done
    for i in "${chosen[@]}"; do
        pid=${pids[$i]}
        if kill -0 "$pid" 2>/dev/null; then
            echo "run.sh: ${names[$i]} (pid $pid) did not stop; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
}

# Stop everything started above; a private Redis last, once nothing uses it.
stop_all() {
    trap - EXIT INT TERM
    stop_some REST
    stop_some SERVICES
    wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# redis_answers URL: whether a Redis server answers PING at URL (within a second).
redis_answers() {
    "$PY" - "$1" <<'PYTHON' >/dev/null 2>&1
import sys

import redis

redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=1).ping()
PYTHON
}

# start_private_redis: run redis-server on a free local port with its files under
# var/redis/, and point REDIS_URL (same database number) at it for every child.
start_private_redis() {
    local port db i
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "run.sh: no Redis answers at $REDIS_URL and redis-server is not installed" >&2
        echo "run.sh: install it (apt-get install redis-server), or set REDIS_URL" >&2
        exit 1
    fi
    port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    db=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).path.strip("/") or "0")' "$REDIS_URL")
    mkdir -p var/redis
    echo "run.sh: no Redis answers at $REDIS_URL; starting a private one on port $port (var/redis/)"
    start redis redis-server --bind 127.0.0.1 --port "$port" --dir "$PWD/var/redis" \
        --logfile "$PWD/var/redis/redis.log" --save "" --appendonly no --daemonize no
    export REDIS_URL="redis://127.0.0.1:$port/$db"
    for ((i = 0; i < 50; i++)); do
        redis_answers "$REDIS_URL" && return 0
        sleep 0.1
    done
    echo "run.sh: the private redis-server did not answer; see var/redis/redis.log" >&2
    exit 1
}

# One-off preparation (runs in the foreground, before anything starts).
"$PY" manage.py migrate --noinput
"$PY" manage.py ensure_demo_admin

# Processes.
if redis_answers "$REDIS_URL"; then
    echo "run.sh: using the Redis at $REDIS_URL"
else
    start_private_redis
fi
mkdir -p var
echo "Tidemark console: http://$HOST:$PORT/"
start web "$PY" manage.py runserver "$HOST:$PORT" --noreload
# Two workers: the store's upkeep and the monitoring on the default queue, and the alert
# evaluation, delivery and heartbeat on their own queue (a long job never delays a page).
start worker "$CELERY" -A console worker -Q celery -n "default@%h" --loglevel=info --concurrency=2
start alerts-worker "$CELERY" -A console worker -Q alerts -n "alerts@%h" --loglevel=info --concurrency=1
start beat "$CELERY" -A console beat --loglevel=info --schedule var/celerybeat-schedule
if [[ ${TIDEMARK_DEMO:-true} == true ]]; then
    # Demo traffic: a healthy, a slow and a stalled consumer group (TIDEMARK_DEMO=false: none).
    start demo "$PY" manage.py simulate
fi

# Wait until a signal arrives or any process exits; the EXIT trap stops the rest.
status=0
wait -n || status=$?
echo "run.sh: a process exited (status $status); stopping the others"
exit "$status"
