#!/usr/bin/env bash
# `make run`: one real turn through robotad, offline, on a private daemon.
#
# What it does, each step announced as it happens:
#   1. starts robotad on a private socket in a fresh temporary folder (its own state folder,
#      examples/config.demo.toml, the offline `scripted` provider) and waits for it to report
#      ready (--ready-fd: no sleeping, no polling);
#   2. creates a session in a temporary working folder, scripted by examples/demo-script.json;
#   3. runs a turn with `robotactl run`: the reply streams in chunks, then the model asks to
#      Write a file — which needs a person's approval in the default mode, so without a
#      terminal to ask on robotactl prints the request and exits 3;
#   4. answers it with `robotactl approve` (the turn resumes and the final reply streams);
#   5. shows the tool's real effect (the file);
#   6. shows the session as robotad stored it (`robotactl show`);
#   7. shuts robotad down and removes everything it made.
#
# Needs `robotad` and `robotactl` on PATH (the Makefile puts the virtualenv's bin there).
# Touches nothing outside its temporary folder: not your sessions, not your daemon.
# ROBOTA_DEMO_DIR=DIR uses DIR (created if missing) instead, and keeps it afterwards.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

for tool in robotad robotactl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "demo: $tool is not on PATH (run it with \`make run\`)" >&2
        exit 1
    fi
done

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
    bold=$'\e[1m' dim=$'\e[2m' green=$'\e[32m' reset=$'\e[0m'
else
    bold='' dim='' green='' reset=''
fi
step_number=0
step() { step_number=$((step_number + 1)); printf '\n%s==> %d. %s%s\n' "$bold" "$step_number" "$*" "$reset"; }
say() { printf '%s    %s%s\n' "$dim" "$*" "$reset"; }
shown() { printf '%s    $ %s%s\n' "$dim" "$*" "$reset"; "$@"; }

# -- a private world ------------------------------------------------------------------------
keep_root=''
if [ -n "${ROBOTA_DEMO_DIR:-}" ]; then
    mkdir -p "$ROBOTA_DEMO_DIR"
    demo_root="$(cd "$ROBOTA_DEMO_DIR" && pwd)"
    keep_root=1
else
    demo_root="$(mktemp -d "${TMPDIR:-/tmp}/robota-demo.XXXXXX")"
fi
chmod 700 "$demo_root"
mkdir -p "$demo_root/run" "$demo_root/work"
chmod 700 "$demo_root/run"
work="$demo_root/work"
daemon_log="$demo_root/robotad.log"
daemon_pid=''

export ROBOTA_SOCKET="$demo_root/run/robotad.sock"
export ROBOTA_STATE_DIR="$demo_root/state"
export ROBOTA_CONFIG="$here/config.demo.toml"
unset ROBOTA_SESSION ROBOTA_NO_AUTOSTART

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        robotactl --no-autostart shutdown --wait --grace 2 >/dev/null 2>&1 || kill "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    if [ "$status" -ne 0 ] && [ -s "$daemon_log" ]; then
        echo "demo: failed (status $status); robotad's output:" >&2
        sed 's/^/    /' "$daemon_log" >&2
    fi
    if [ -n "$keep_root" ]; then
        rm -f "$demo_root/ready"
    else
        rm -rf "$demo_root"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "demo: $*" >&2; exit 1; }

# -- 1. the daemon ----------------------------------------------------------------------------
step "Starting a private robotad (offline scripted provider)"
say "socket  $ROBOTA_SOCKET"
say "state   $ROBOTA_STATE_DIR"
say "config  $ROBOTA_CONFIG"
ready="$demo_root/ready"
mkfifo -m 600 "$ready"
robotad --socket "$ROBOTA_SOCKET" --ready-fd 3 3>"$ready" >"$daemon_log" 2>&1 </dev/null &
daemon_pid=$!
# robotad writes one byte to fd 3 once it serves; EOF first means it exited.
if ! IFS= read -r -t 30 _ <"$ready"; then
    fail "robotad did not report ready"
fi
say "robotad is serving (pid $daemon_pid)"
# From here on, a vanished daemon is an error, never a reason to start another.
export ROBOTA_NO_AUTOSTART=1
shown robotactl status

# -- 2. a session -----------------------------------------------------------------------------
step "Creating a session in a scratch working folder"
cd "$work"
say "working folder $work"
printf '%s    $ robotactl new --script %s%s\n' "$dim" "examples/demo-script.json" "$reset"
session_id="$(robotactl new --script "$here/demo-script.json")"
say "session id: $session_id"
say "(commands run in this folder pick this session without -s)"

# -- 3. the turn ------------------------------------------------------------------------------
step "Running a turn: streamed text, then a Write that needs approval"
prompt="Please write a friendly greeting into hello.txt"
printf '%s    $ robotactl run "%s" </dev/null%s\n' "$dim" "$prompt" "$reset"
# stdin is not a terminal, so robotactl does not ask: it prints the request and exits 3.
status=0
robotactl run "$prompt" </dev/null || status=$?
if [ "$status" -ne 3 ]; then
    fail "expected robotactl run to exit 3 (waiting for approval), got $status"
fi
say "robotactl exited 3: the turn is parked in robotad, waiting for approval."
say "(it would wait like this across disconnects and daemon restarts)"

# -- 4. the approval --------------------------------------------------------------------------
step "Approving the Write (as a person would, from any terminal)"
shown robotactl approve </dev/null

# -- 5. the effect ----------------------------------------------------------------------------
step "The tool's real effect"
[ -f "$work/hello.txt" ] || fail "hello.txt was not written"
shown cat hello.txt

step "The session as robotad stored it"
shown robotactl show
echo
shown robotactl ls

# -- 6. goodbye -------------------------------------------------------------------------------
step "Shutting robotad down and cleaning up"
shown robotactl shutdown --wait
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=''
printf '\n%sDemo complete.%s Try it with a real model: see examples/config.openai.toml and\n' "$green$bold" "$reset"
printf 'examples/config.anthropic.toml, then `robotactl new` and `robotactl run "..."`.\n'
