#!/usr/bin/env bash
# Start the Tidemark console and everything it needs, then wait.
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

# Stop everything started above: SIGTERM, a grace period, then SIGKILL.
stop_all() {
    trap - EXIT INT TERM
    local i pid alive deadline
    for i in "${!pids[@]}"; do
        pid=${pids[$i]}
        if kill -0 "$pid" 2>/dev/null; then
            echo "run.sh: stopping ${names[$i]} (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    deadline=$((SECONDS + STOP_GRACE_SECONDS))
    while ((SECONDS < deadline)); do
        alive=0
        for pid in "${pids[@]}"; do
            if kill -0 "$pid" 2>/dev/null; then alive=1; fi
        done
        ((alive)) || break
        sleep 0.2
    done
    for i in "${!pids[@]}"; do
        pid=${pids[$i]}
        if kill -0 "$pid" 2>/dev/null; then
            echo "run.sh: ${names[$i]} (pid $pid) did not stop; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One-off preparation (runs in the foreground, before anything starts).
"$PY" manage.py migrate --noinput
"$PY" manage.py ensure_demo_admin

# Processes.
echo "Tidemark console: http://$HOST:$PORT/"
start web "$PY" manage.py runserver "$HOST:$PORT" --noreload

# Wait until a signal arrives or any process exits; the EXIT trap stops the rest.
status=0
wait -n || status=$?
echo "run.sh: a process exited (status $status); stopping the others"
exit "$status"
