-- agent-hooks schema, migrations: m001_sessions_tool_calls_errors,m002_tasks,m003_guards,m004_identity_memory,m005_continuity,m006_outbox,m007_lineage,m008_command_center,m009_identity_workspaces,m010_spool,m011_persist,m012_approvals,m013_board_tmux_commands,m014_cost,m015_cost_samples,m016_memory_vectors,m017_approvals_agent,m018_fleet_credentials,m019_fleet_cost,m020_notifications,m021_launches,m022_fleet_shared_state
CREATE TABLE "_sqlite_migrations" (
   "id" INTEGER PRIMARY KEY,
   "migration_set" TEXT,
   "name" TEXT,
   "applied_at" TEXT
);

CREATE UNIQUE INDEX "idx__sqlite_migrations_migration_set_name"
    ON "_sqlite_migrations" ("migration_set", "name");

CREATE TABLE "sessions" (
   "session_id" TEXT PRIMARY KEY,
   "cwd" TEXT,
   "transcript_path" TEXT,
   "tmux_session" TEXT,
   "agent" TEXT,
   "role" TEXT,
   "state" TEXT NOT NULL DEFAULT 'live',
   "first_seen_at" REAL NOT NULL,
   "last_seen_at" REAL NOT NULL,
   "last_event" TEXT,
   "ended_at" REAL,
   "hook_calls" INTEGER DEFAULT 0,
   "tool_calls" INTEGER DEFAULT 0
, "task_id" TEXT, "first_prompt" TEXT, "cancelled_at" REAL, "cancel_reason" TEXT, "guards_since_id" INTEGER, "last_decision" TEXT, "last_guard_id" INTEGER, "guard_warned" INTEGER NOT NULL DEFAULT 0, "guard_denied" INTEGER NOT NULL DEFAULT 0, "compactions" INTEGER NOT NULL DEFAULT 0, "last_compact_at" REAL, "forked_at" REAL, "parent_session_id" TEXT, "persist_chain" INTEGER, "persist_last" TEXT, "persist_last_at" REAL, "context_pct" REAL, "pressure_noticed_at" REAL, "waiting_on" TEXT, "waiting_detail" TEXT, "waiting_since" REAL, "tmux_pane" TEXT, "tmux_socket" TEXT, "cost_usd" REAL NOT NULL DEFAULT 0, "cost_unpriced" INTEGER NOT NULL DEFAULT 0, "cost_noticed" TEXT);

CREATE INDEX "idx_sessions_last_seen_at"
    ON "sessions" ("last_seen_at");

CREATE INDEX "idx_sessions_tmux_session"
    ON "sessions" ("tmux_session");

CREATE TABLE "tool_calls" (
   "id" INTEGER PRIMARY KEY,
   "session_id" TEXT NOT NULL,
   "tool_use_id" TEXT,
   "tool_name" TEXT NOT NULL,
   "input_hash" TEXT NOT NULL,
   "output_hash" TEXT,
   "outcome" TEXT NOT NULL DEFAULT 'pending',
   "decision" TEXT,
   "rule" TEXT,
   "reason" TEXT,
   "error" TEXT,
   "duration_ms" INTEGER,
   "started_at" REAL NOT NULL,
   "ended_at" REAL
, "poll_rule" TEXT, "poll_key" TEXT, "agent_id" TEXT, "command" TEXT);

CREATE INDEX "idx_tool_calls_session_id_id"
    ON "tool_calls" ("session_id", "id");

CREATE INDEX "idx_tool_calls_session_id_tool_use_id"
    ON "tool_calls" ("session_id", "tool_use_id");

CREATE TABLE "session_events" (
   "id" INTEGER PRIMARY KEY,
   "session_id" TEXT NOT NULL,
   "event" TEXT NOT NULL,
   "detail" TEXT,
   "at" REAL NOT NULL
);

CREATE INDEX "idx_session_events_session_id_id"
    ON "session_events" ("session_id", "id");

CREATE TABLE "errors" (
   "id" INTEGER PRIMARY KEY,
   "at" REAL NOT NULL,
   "event" TEXT,
   "kind" TEXT NOT NULL,
   "session_id" TEXT,
   "message" TEXT
);

CREATE TABLE "meta" (
   "key" TEXT PRIMARY KEY,
   "value" TEXT
);

CREATE TABLE "tasks" (
   "task_id" TEXT PRIMARY KEY,
   "description" TEXT,
   "progress" TEXT,
   "state" TEXT NOT NULL DEFAULT 'open',
   "cancel_reason" TEXT,
   "cancelled_at" REAL,
   "created_at" REAL NOT NULL,
   "updated_at" REAL NOT NULL
, "persist" INTEGER, "max_continuations" INTEGER, "done_note" TEXT, "done_at" REAL, "blocked_reason" TEXT, "blocked_at" REAL, "last_bypass" TEXT, "last_bypass_at" REAL, "continuations" INTEGER NOT NULL DEFAULT 0, "budget_usd" REAL, "spent_usd" REAL);

CREATE INDEX "idx_sessions_task_id"
    ON "sessions" ("task_id");

CREATE INDEX idx_tool_calls_poll_key ON tool_calls (session_id, poll_key, id) WHERE poll_key IS NOT NULL;

CREATE INDEX idx_tool_calls_poll_rule ON tool_calls (session_id, poll_rule, started_at) WHERE poll_rule IS NOT NULL;

CREATE INDEX idx_tool_calls_agent ON tool_calls (session_id, agent_id, id) WHERE agent_id IS NOT NULL;

CREATE INDEX "idx_tasks_state"
    ON "tasks" ("state");

CREATE TABLE "identity_versions" (
   "id" INTEGER PRIMARY KEY,
   "agent" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "version" INTEGER NOT NULL,
   "content" TEXT NOT NULL,
   "sha256" TEXT NOT NULL,
   "chars" INTEGER NOT NULL,
   "source" TEXT NOT NULL,
   "session_id" TEXT,
   "path" TEXT,
   "at" REAL NOT NULL
);

CREATE UNIQUE INDEX "idx_identity_versions_agent_name_version"
    ON "identity_versions" ("agent", "name", "version");

CREATE TABLE "identity_baselines" (
   "session_id" TEXT,
   "name" TEXT,
   "agent" TEXT NOT NULL,
   "path" TEXT NOT NULL,
   "sha256" TEXT,
   "version_id" INTEGER,
   "injected_version_id" INTEGER,
   "at" REAL NOT NULL,
   PRIMARY KEY ("session_id", "name")
);

CREATE TABLE "identity_written" (
   "path" TEXT PRIMARY KEY,
   "agent" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "sha256" TEXT NOT NULL,
   "at" REAL NOT NULL
);

CREATE TABLE "identity_reports" (
   "id" INTEGER PRIMARY KEY,
   "agent" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "session_id" TEXT,
   "detail" TEXT NOT NULL,
   "sha256" TEXT,
   "chars" INTEGER,
   "at" REAL NOT NULL,
   "reported_at" REAL,
   "reported_session" TEXT
);

CREATE INDEX "idx_identity_reports_agent_reported_at"
    ON "identity_reports" ("agent", "reported_at");

CREATE TABLE "memory_docs" (
   "id" INTEGER PRIMARY KEY,
   "path" TEXT NOT NULL,
   "root" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "scope" TEXT NOT NULL,
   "agent" TEXT NOT NULL,
   "sha256" TEXT NOT NULL,
   "size" INTEGER,
   "mtime_ns" INTEGER,
   "session_id" TEXT,
   "indexed_at" REAL NOT NULL
);

CREATE UNIQUE INDEX "idx_memory_docs_path"
    ON "memory_docs" ("path");

CREATE INDEX "idx_memory_docs_root"
    ON "memory_docs" ("root");

CREATE VIRTUAL TABLE memory_fts USING fts5(name, path, content, scope UNINDEXED, agent UNINDEXED, tokenize = 'porter unicode61');

CREATE TABLE "session_summaries" (
   "session_id" TEXT PRIMARY KEY,
   "agent" TEXT,
   "task_id" TEXT,
   "summary" TEXT NOT NULL,
   "source" TEXT NOT NULL,
   "at" REAL NOT NULL
);

CREATE VIRTUAL TABLE "session_summaries_fts" USING FTS5 (
    "summary", "agent", "task_id",
    tokenize='porter unicode61',
    content="session_summaries"
);

CREATE TRIGGER "session_summaries_ai" AFTER INSERT ON "session_summaries" BEGIN
  INSERT INTO "session_summaries_fts" (rowid, "summary", "agent", "task_id") VALUES (new.rowid, new."summary", new."agent", new."task_id");
END;

CREATE TRIGGER "session_summaries_ad" AFTER DELETE ON "session_summaries" BEGIN
  INSERT INTO "session_summaries_fts" ("session_summaries_fts", rowid, "summary", "agent", "task_id") VALUES('delete', old.rowid, old."summary", old."agent", old."task_id");
END;

CREATE TRIGGER "session_summaries_au" AFTER UPDATE ON "session_summaries" BEGIN
  INSERT INTO "session_summaries_fts" ("session_summaries_fts", rowid, "summary", "agent", "task_id") VALUES('delete', old.rowid, old."summary", old."agent", old."task_id");
  INSERT INTO "session_summaries_fts" (rowid, "summary", "agent", "task_id") VALUES (new.rowid, new."summary", new."agent", new."task_id");
END;

CREATE TABLE "cleanup_runs" (
   "id" INTEGER PRIMARY KEY,
   "session_id" TEXT NOT NULL,
   "command" TEXT NOT NULL,
   "exit_code" INTEGER,
   "timed_out" INTEGER,
   "output_tail" TEXT,
   "duration_ms" INTEGER,
   "started_at" REAL NOT NULL
);

CREATE INDEX "idx_cleanup_runs_session_id_id"
    ON "cleanup_runs" ("session_id", "id");

CREATE TABLE "outbox" (
   "id" INTEGER PRIMARY KEY,
   "event_id" TEXT NOT NULL,
   "session_key" TEXT NOT NULL,
   "hook_event" TEXT,
   "event" TEXT NOT NULL,
   "body" TEXT NOT NULL,
   "created_at" REAL NOT NULL,
   "state" TEXT NOT NULL DEFAULT 'queued',
   "attempts" INTEGER DEFAULT 0,
   "next_at" REAL DEFAULT 0.0,
   "last_try_at" REAL,
   "last_status" INTEGER,
   "last_error" TEXT,
   "dead_at" REAL
);

CREATE UNIQUE INDEX "idx_outbox_event_id"
    ON "outbox" ("event_id");

CREATE INDEX "idx_outbox_state_id"
    ON "outbox" ("state", "id");

CREATE INDEX "idx_outbox_session_key_state_id"
    ON "outbox" ("session_key", "state", "id");

CREATE TABLE "forward_sessions" (
   "session_key" TEXT PRIMARY KEY,
   "last_event" TEXT,
   "last_state" TEXT,
   "last_at" REAL NOT NULL,
   "last_running_at" REAL
);

CREATE INDEX "idx_forward_sessions_last_at"
    ON "forward_sessions" ("last_at");

CREATE TABLE "fleet_sessions" (
   "id" TEXT PRIMARY KEY,
   "host" TEXT NOT NULL DEFAULT '',
   "local" INTEGER NOT NULL DEFAULT 0,
   "session_id" TEXT,
   "tmux_session" TEXT,
   "agent_type" TEXT,
   "label" TEXT,
   "prompt" TEXT,
   "task_id" TEXT,
   "depends_on" TEXT,
   "state" TEXT NOT NULL DEFAULT 'idle',
   "last_event" TEXT,
   "metadata" TEXT,
   "events" INTEGER DEFAULT 0,
   "tool_events" INTEGER DEFAULT 0,
   "cancelled_at" REAL,
   "cancel_reason" TEXT,
   "cancel_seq" INTEGER,
   "created_at" REAL NOT NULL,
   "updated_at" REAL NOT NULL
, "details" TEXT, "details_at" REAL, "cost_usd" REAL);

CREATE INDEX "idx_fleet_sessions_host_tmux_session"
    ON "fleet_sessions" ("host", "tmux_session");

CREATE INDEX "idx_fleet_sessions_session_id"
    ON "fleet_sessions" ("session_id");

CREATE INDEX "idx_fleet_sessions_updated_at"
    ON "fleet_sessions" ("updated_at");

CREATE TABLE "fleet_events" (
   "id" INTEGER PRIMARY KEY,
   "fleet_id" TEXT NOT NULL,
   "event" TEXT NOT NULL,
   "from_state" TEXT,
   "to_state" TEXT,
   "metadata" TEXT,
   "source" TEXT NOT NULL,
   "idem_key" TEXT,
   "at" REAL NOT NULL
);

CREATE INDEX "idx_fleet_events_fleet_id_id"
    ON "fleet_events" ("fleet_id", "id");

CREATE UNIQUE INDEX idx_fleet_events_idem ON fleet_events (idem_key) WHERE idem_key IS NOT NULL;

CREATE TABLE "fleet_controls" (
   "seq" INTEGER PRIMARY KEY,
   "host" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "action" TEXT NOT NULL,
   "fleet_id" TEXT,
   "session_id" TEXT,
   "tmux_session" TEXT,
   "task_id" TEXT,
   "reason" TEXT,
   "at" REAL NOT NULL
);

CREATE INDEX "idx_fleet_controls_host_seq"
    ON "fleet_controls" ("host", "seq");

CREATE TABLE "fleet_hosts" (
   "host" TEXT PRIMARY KEY,
   "last_seen_at" REAL NOT NULL,
   "applied_seq" INTEGER
, "auth" TEXT, "launch" TEXT);

CREATE TABLE "local_feed" (
   "id" INTEGER PRIMARY KEY,
   "session_id" TEXT,
   "hook_event" TEXT,
   "at" REAL
);

CREATE TRIGGER local_feed_insert AFTER INSERT ON sessions BEGIN INSERT INTO local_feed (session_id, hook_event, at) VALUES (NEW.session_id, NEW.last_event, NEW.last_seen_at); DELETE FROM local_feed WHERE id <= (SELECT max(id) FROM local_feed) - 20000; END;

CREATE TRIGGER local_feed_update AFTER UPDATE OF last_seen_at ON sessions BEGIN INSERT INTO local_feed (session_id, hook_event, at) VALUES (NEW.session_id, NEW.last_event, NEW.last_seen_at); DELETE FROM local_feed WHERE id <= (SELECT max(id) FROM local_feed) - 20000; END;

CREATE TABLE "identity_workspaces" (
   "session_id" TEXT PRIMARY KEY,
   "path" TEXT NOT NULL,
   "dev" INTEGER NOT NULL,
   "ino" INTEGER NOT NULL,
   "at" REAL NOT NULL
);

CREATE INDEX "idx_identity_workspaces_at"
    ON "identity_workspaces" ("at");

CREATE TABLE "spool_applied" (
   "call_id" TEXT PRIMARY KEY,
   "at" REAL NOT NULL
);

CREATE INDEX "idx_spool_applied_at"
    ON "spool_applied" ("at");

CREATE TABLE "subagents" (
   "session_id" TEXT NOT NULL,
   "agent_id" TEXT NOT NULL,
   "agent_type" TEXT,
   "started_at" REAL,
   "stopped_at" REAL,
   "last_message" TEXT,
   PRIMARY KEY ("session_id", "agent_id")
);

CREATE TABLE "approvals" (
   "id" TEXT PRIMARY KEY,
   "host" TEXT NOT NULL DEFAULT '',
   "session_id" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "tool_name" TEXT NOT NULL,
   "tool_input" TEXT,
   "tool_use_id" TEXT,
   "questions" TEXT,
   "permission_suggestions" TEXT,
   "gate" TEXT,
   "on_timeout" TEXT,
   "state" TEXT NOT NULL DEFAULT 'pending',
   "created_at" REAL NOT NULL,
   "expires_at" REAL,
   "decision" TEXT,
   "message" TEXT,
   "interrupt" INTEGER DEFAULT 0,
   "answers" TEXT,
   "answered_by" TEXT,
   "answered_via" TEXT,
   "answered_where" TEXT,
   "answered_at" REAL,
   "waited_ms" INTEGER,
   "note" TEXT
, "agent_id" TEXT, "notified_by_host" INTEGER, "notify_state" TEXT);

CREATE INDEX "idx_approvals_session_id_created_at"
    ON "approvals" ("session_id", "created_at");

CREATE INDEX "idx_approvals_created_at"
    ON "approvals" ("created_at");

CREATE INDEX idx_approvals_pending ON approvals (session_id, created_at) WHERE state = 'pending';

CREATE TABLE "cost_messages" (
   "key" TEXT PRIMARY KEY,
   "session_id" TEXT NOT NULL,
   "agent_id" TEXT,
   "model" TEXT NOT NULL,
   "at" REAL NOT NULL,
   "input_tokens" INTEGER,
   "output_tokens" INTEGER,
   "cache_creation_input_tokens" INTEGER,
   "cache_1h_input_tokens" INTEGER,
   "cache_read_input_tokens" INTEGER,
   "usd" REAL
);

CREATE INDEX "idx_cost_messages_session_id_at"
    ON "cost_messages" ("session_id", "at");

CREATE INDEX "idx_cost_messages_at"
    ON "cost_messages" ("at");

CREATE TABLE "cost_offsets" (
   "path" TEXT PRIMARY KEY,
   "session_id" TEXT NOT NULL,
   "agent_id" TEXT,
   "inode" INTEGER,
   "offset" INTEGER NOT NULL,
   "updated_at" REAL
);

CREATE INDEX "idx_cost_offsets_session_id"
    ON "cost_offsets" ("session_id");

CREATE TABLE "cost_daily" (
   "day" TEXT,
   "agent" TEXT,
   "usd" REAL NOT NULL,
   PRIMARY KEY ("day", "agent")
);

CREATE TABLE "fleet_cost_samples" (
   "fleet_id" TEXT NOT NULL,
   "at" REAL NOT NULL,
   "usd" REAL NOT NULL
);

CREATE INDEX "idx_fleet_cost_samples_fleet_id_at"
    ON "fleet_cost_samples" ("fleet_id", "at");

CREATE TABLE "memory_vectors" (
   "kind" TEXT,
   "key" TEXT,
   "sha256" TEXT NOT NULL,
   "model" TEXT NOT NULL,
   "vector" BLOB NOT NULL,
   "at" REAL NOT NULL,
   PRIMARY KEY ("kind", "key")
);

CREATE INDEX "idx_memory_vectors_at"
    ON "memory_vectors" ("at");

CREATE TABLE "fleet_credentials" (
   "id" TEXT PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "secret_sha256" TEXT NOT NULL,
   "paired_at" REAL NOT NULL,
   "paired_from" TEXT,
   "last_seen_at" REAL,
   "last_address" TEXT,
   "revoked_at" REAL
);

CREATE UNIQUE INDEX idx_fleet_credentials_live ON fleet_credentials (kind, name) WHERE revoked_at IS NULL;

CREATE TABLE "fleet_pairing_codes" (
   "code_sha256" TEXT PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "created_at" REAL NOT NULL,
   "expires_at" REAL NOT NULL,
   "used_at" REAL,
   "used_from" TEXT
);

CREATE TABLE "fleet_actions" (
   "id" INTEGER PRIMARY KEY,
   "at" REAL NOT NULL,
   "action" TEXT NOT NULL,
   "target" TEXT,
   "card" TEXT,
   "host" TEXT,
   "status" INTEGER,
   "by_kind" TEXT NOT NULL,
   "by_name" TEXT NOT NULL,
   "by_address" TEXT,
   "note" TEXT
);

CREATE INDEX "idx_fleet_actions_card_id"
    ON "fleet_actions" ("card", "id");

CREATE TABLE "fleet_cost_messages" (
   "host" TEXT,
   "key" TEXT,
   "session_id" TEXT NOT NULL,
   "agent_id" TEXT,
   "agent" TEXT,
   "task_id" TEXT,
   "model" TEXT NOT NULL,
   "at" REAL NOT NULL,
   "input_tokens" INTEGER,
   "output_tokens" INTEGER,
   "cache_creation_input_tokens" INTEGER,
   "cache_1h_input_tokens" INTEGER,
   "cache_read_input_tokens" INTEGER,
   "usd" REAL,
   "received_at" REAL,
   PRIMARY KEY ("host", "key")
);

CREATE INDEX "idx_fleet_cost_messages_host_session_id"
    ON "fleet_cost_messages" ("host", "session_id");

CREATE INDEX "idx_fleet_cost_messages_at"
    ON "fleet_cost_messages" ("at");

CREATE INDEX "idx_fleet_cost_messages_task_id"
    ON "fleet_cost_messages" ("task_id");

CREATE INDEX "idx_fleet_cost_messages_agent_at"
    ON "fleet_cost_messages" ("agent", "at");

CREATE TABLE "fleet_budgets" (
   "kind" TEXT,
   "key" TEXT,
   "name" TEXT NOT NULL,
   "limit_usd" REAL NOT NULL,
   "elsewhere_usd" REAL NOT NULL,
   "day" TEXT,
   "center" TEXT,
   "updated_at" REAL NOT NULL,
   PRIMARY KEY ("kind", "key")
);

CREATE TABLE "fleet_cost_alerts" (
   "id" INTEGER PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "subject" TEXT NOT NULL,
   "limit_usd" REAL NOT NULL,
   "spent_usd" REAL,
   "period" TEXT NOT NULL,
   "at" REAL NOT NULL,
   "due_at" REAL,
   "message" TEXT NOT NULL,
   "notified_at" REAL
);

CREATE UNIQUE INDEX idx_fleet_cost_alerts_once ON fleet_cost_alerts (kind, subject, limit_usd, period);

CREATE INDEX idx_fleet_cost_alerts_pending ON fleet_cost_alerts (at) WHERE notified_at IS NULL;

CREATE TABLE "notify_outbox" (
   "id" INTEGER PRIMARY KEY,
   "subject" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "channel" TEXT NOT NULL,
   "channel_name" TEXT,
   "title" TEXT,
   "body" TEXT,
   "link" TEXT,
   "tag" TEXT,
   "state" TEXT NOT NULL,
   "attempts" INTEGER DEFAULT 0,
   "sends" INTEGER DEFAULT 0,
   "created_at" REAL NOT NULL,
   "next_at" REAL,
   "last_at" REAL,
   "sent_at" REAL,
   "last_error" TEXT,
   "last_answer" TEXT
);

CREATE UNIQUE INDEX idx_notify_outbox_subject ON notify_outbox (subject, channel);

CREATE INDEX idx_notify_outbox_due ON notify_outbox (next_at) WHERE next_at IS NOT NULL;

CREATE INDEX "idx_notify_outbox_channel_last_at"
    ON "notify_outbox" ("channel", "last_at");

CREATE TABLE "push_subscriptions" (
   "channel" TEXT PRIMARY KEY,
   "endpoint" TEXT NOT NULL,
   "p256dh" TEXT NOT NULL,
   "auth" TEXT NOT NULL,
   "device" TEXT,
   "created_at" REAL NOT NULL,
   "last_ok_at" REAL,
   "last_error" TEXT
);

CREATE TABLE "fleet_launches" (
   "card_id" TEXT PRIMARY KEY,
   "host" TEXT NOT NULL,
   "seq" INTEGER,
   "state" TEXT NOT NULL,
   "error" TEXT,
   "cwd" TEXT,
   "permission_mode" TEXT,
   "at" REAL NOT NULL,
   "settled_at" REAL
);

CREATE INDEX "idx_fleet_launches_seq"
    ON "fleet_launches" ("seq");

CREATE TABLE "fleet_left_out" (
   "host" TEXT PRIMARY KEY,
   "approvals" INTEGER NOT NULL DEFAULT 0,
   "cards" INTEGER NOT NULL DEFAULT 0,
   "refused" INTEGER NOT NULL DEFAULT 0,
   "since" REAL,
   "updated_at" REAL
);

CREATE TABLE "fleet_shared" (
   "name" TEXT PRIMARY KEY,
   "doc" TEXT NOT NULL,
   "at" REAL
);

CREATE TABLE "fleet_replies" (
   "id" INTEGER PRIMARY KEY,
   "seq" INTEGER NOT NULL,
   "host" TEXT,
   "doc" TEXT NOT NULL,
   "at" REAL NOT NULL
);
