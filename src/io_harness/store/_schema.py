"""The store's schema, written once for both backends; migrations only add.

The migrations are SQLite's SQL. PostgreSQL runs the same statements with its
own types (:func:`postgres_migration`): a migration uses only what both speak
(``CREATE TABLE``, ``ALTER TABLE ... ADD COLUMN``, ``CREATE INDEX``). A SQLite
store's version is ``PRAGMA user_version``, a PostgreSQL store's the row of
``store_format``.

Every table is part of the trace an operator can query with plain SQL. JSON
columns hold the canonical pydantic models' JSON. A table's columns are the
fields of the record that writes its rows (``_records.py``) and of the one
that reads them (``_trace.py``, ``_rows.py``), but for the differences
``tests/test_store_tables.py`` lists with their reasons: a column added
here needs its field in both.
"""

from __future__ import annotations

import re

from io_harness.errors import ResumeError, StorageError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "NewerFormatError", "newer_format", "postgres_migration"]

_V1 = """
CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    goal               TEXT NOT NULL,
    contract           TEXT NOT NULL,          -- TaskContract JSON
    system_prompt      TEXT NOT NULL,
    tools              TEXT NOT NULL,          -- ToolSpec JSON list offered to the model
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    status             TEXT NOT NULL,          -- running | awaiting | finished
    outcome            TEXT,                   -- RunOutcome value once finished
    steps              INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    started_at         REAL NOT NULL,          -- Unix time
    finished_at        REAL,
    error              TEXT                    -- JSON of the ProviderError that ended the run
);
CREATE INDEX runs_by_start ON runs (started_at DESC);

CREATE TABLE messages (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq    INTEGER NOT NULL,                   -- position in the conversation
    step   INTEGER NOT NULL,                   -- 0: written when the run was created
    role   TEXT NOT NULL,
    body   TEXT NOT NULL,                      -- Message JSON
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE steps (
    run_id             TEXT NOT NULL REFERENCES runs (id),
    step               INTEGER NOT NULL,
    started_at         REAL NOT NULL,
    finished_at        REAL NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    reasoning_tokens   INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE provider_calls (
    run_id             TEXT NOT NULL REFERENCES runs (id),
    step               INTEGER NOT NULL,       -- the step this attempt belongs to
    attempt            INTEGER NOT NULL,       -- 1 for the first try
    provider           TEXT NOT NULL,          -- which provider answered (a Fallback names each)
    model              TEXT NOT NULL,          -- the model asked for
    started_at         REAL NOT NULL,
    latency            REAL NOT NULL,          -- seconds
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    finish_reason      TEXT,
    error_kind         TEXT,                   -- ProviderError kind when it failed
    error_status       INTEGER,
    error_message      TEXT,
    PRIMARY KEY (run_id, step, attempt)
);

CREATE TABLE tool_calls (
    run_id    TEXT NOT NULL REFERENCES runs (id),
    step      INTEGER NOT NULL,
    seq       INTEGER NOT NULL,                -- order within the step
    call_id   TEXT NOT NULL,
    name      TEXT NOT NULL,
    arguments TEXT NOT NULL,                   -- JSON as the model sent it
    result    TEXT NOT NULL,
    is_error  INTEGER NOT NULL,
    changed   TEXT NOT NULL,                   -- JSON list of paths the call changed
    PRIMARY KEY (run_id, step, seq)
);

CREATE TABLE verifications (
    run_id    TEXT NOT NULL REFERENCES runs (id),
    step      INTEGER NOT NULL,
    seq       INTEGER NOT NULL,                -- order within the step
    trigger   TEXT NOT NULL,                   -- file_changed | turn_ended | resumed
    passed    INTEGER NOT NULL,
    criterion TEXT NOT NULL,
    summary   TEXT NOT NULL,
    result    TEXT NOT NULL,                   -- VerificationResult JSON, output included
    duration  REAL NOT NULL,
    PRIMARY KEY (run_id, step, seq)
);

CREATE TABLE events (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq    INTEGER NOT NULL,
    step   INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    at     REAL NOT NULL,
    data   TEXT NOT NULL,                      -- the event's JSON
    PRIMARY KEY (run_id, seq)
);
"""

_V2 = """
ALTER TABLE runs ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;     -- priced spend, micro-units
ALTER TABLE runs ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0;  -- answered, no price known
ALTER TABLE steps ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE provider_calls ADD COLUMN served_model TEXT;         -- the model that answered
ALTER TABLE provider_calls ADD COLUMN time_to_first_token REAL;  -- seconds; NULL when not streamed
ALTER TABLE provider_calls ADD COLUMN cost_micros INTEGER;       -- NULL: unpriced
"""

_V3 = """
ALTER TABLE runs ADD COLUMN policy TEXT;      -- Policy JSON the run is governed by; NULL: before v3
ALTER TABLE runs ADD COLUMN remembered TEXT;  -- JSON list of rules approvers asked to remember
ALTER TABLE runs ADD COLUMN labels TEXT;      -- JSON object of the caller's string labels

-- Every verdict of the gate and every decision on it, in the order they were made.
CREATE TABLE permissions (
    run_id     TEXT NOT NULL REFERENCES runs (id),
    seq        INTEGER NOT NULL,                 -- order within the run
    step       INTEGER NOT NULL,
    call_id    TEXT NOT NULL,                    -- the tool call; '' for the criterion
    act        TEXT NOT NULL,                    -- read | write | exec | net
    target     TEXT NOT NULL,                    -- canonical path, program or host[:port]
    argv       TEXT,                             -- JSON list, for exec
    effect     TEXT NOT NULL,                    -- the policy's verdict: allow | ask | deny
    rule       TEXT,                             -- the rule that decided; NULL: the act's default
    layer      TEXT,
    decision   TEXT NOT NULL,  -- allowed | refused | approved | denied | deferred | skipped (grep)
    decided_by TEXT NOT NULL,  -- policy, remembered, the approver, or who gave a stored decision
    reason     TEXT NOT NULL DEFAULT '',
    at         REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Actions an approver deferred. A run with one that is not done is 'awaiting'.
CREATE TABLE approvals (
    id         TEXT PRIMARY KEY,                 -- the request id
    run_id     TEXT NOT NULL REFERENCES runs (id),
    step       INTEGER NOT NULL,
    status     TEXT NOT NULL,                    -- pending | decided | performing | done
    request    TEXT NOT NULL,                    -- ApprovalRequest JSON
    progress   TEXT NOT NULL,                    -- the step so far, JSON
    decision   TEXT,                             -- Decision JSON once decided
    created_at REAL NOT NULL,
    decided_at REAL
);
CREATE INDEX approvals_by_run ON approvals (run_id, status);
"""

_V4 = """
-- JSON {backend, why, config} of the run's last start (or resume); NULL: stored before v4
ALTER TABLE runs ADD COLUMN sandbox TEXT;

-- What the sandbox did for each command of the run: the exec tool's and the criterion's.
CREATE TABLE sandbox_events (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL,                    -- order within the run
    step    INTEGER NOT NULL,
    call_id TEXT NOT NULL,                       -- the exec tool call; '' for the criterion
    kind    TEXT NOT NULL,                       -- create | exec | cap_hit | net | destroy
    backend TEXT NOT NULL,                       -- the sandbox's name; 'none': run directly
    detail  TEXT NOT NULL,                       -- JSON: mode, limits, argv, duration, cap
    at      REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

_V5 = """
ALTER TABLE runs ADD COLUMN prices TEXT;   -- PriceTable JSON the run is priced with; NULL: unpriced
-- JSON of what the harness supplied: caller_tools {name: sha256 of its spec}, skills [folders],
-- memory (bool). NULL: stored before v5 (no caller tools, skills or memory).
ALTER TABLE runs ADD COLUMN setup TEXT;

-- which kind of tool answered: builtin | caller | mcp | unknown (no tool of that name)
ALTER TABLE tool_calls ADD COLUMN kind TEXT NOT NULL DEFAULT 'builtin';
ALTER TABLE tool_calls ADD COLUMN duration REAL;  -- seconds it ran; NULL: before v5, or refused
ALTER TABLE tool_calls ADD COLUMN error TEXT;     -- what failed inside the tool: exception, timeout

-- What agents remembered, per workspace (its canonical root), across runs.
CREATE TABLE memory (
    workspace  TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    written    INTEGER NOT NULL,                 -- order of writes in the workspace: oldest evicted
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, key)
);

-- Every change to memory: who made it and what it was.
CREATE TABLE memory_log (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    key       TEXT NOT NULL,
    op        TEXT NOT NULL,                     -- set | forget | evict
    value     TEXT,                              -- the value set, or the value lost
    run_id    TEXT,                              -- NULL: from outside a run (ioh memory forget)
    step      INTEGER,
    call_id   TEXT,
    at        REAL NOT NULL
);
CREATE INDEX memory_log_by_run ON memory_log (run_id, seq);
"""

_V6 = """
-- What the run's MCP servers did: start, handshake, list, call, restart, close.
CREATE TABLE mcp_events (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq    INTEGER NOT NULL,                     -- order within the run
    step   INTEGER NOT NULL,                     -- 0: while the run started
    server TEXT NOT NULL,
    kind   TEXT NOT NULL,                  -- start | handshake | list | call | restart | close
    detail TEXT NOT NULL,                        -- JSON: tool, duration, outcome, tool count, error
    at     REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

_V7 = """
-- Sub-agent trees: every agent is a run. A tree's root names itself as root_id; a child
-- names its parent, its depth and the parent's spawn_agent call.
ALTER TABLE runs ADD COLUMN parent_id TEXT;             -- the agent that spawned it; NULL: none
ALTER TABLE runs ADD COLUMN root_id TEXT;               -- the tree's root; NULL: not in a tree
ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spawn_call TEXT;            -- the parent's spawn_agent call id
ALTER TABLE runs ADD COLUMN tree TEXT;  -- JSON: the root's Containment; a child's spawn settings
-- The model's answer of the step in flight (StepProgress JSON), stored before its calls run
-- when they spawn agents, so a redone step spawns the same children; NULL once committed.
ALTER TABLE runs ADD COLUMN journal TEXT;
CREATE UNIQUE INDEX runs_by_spawn ON runs (parent_id, spawn_call);
CREATE INDEX runs_by_root ON runs (root_id);

-- What a tree did as a whole: spawns, refused spawns and each agent's draw on the ledger.
CREATE TABLE tree_events (
    root_id TEXT NOT NULL,
    seq     INTEGER NOT NULL,                    -- order within the tree
    run_id  TEXT NOT NULL REFERENCES runs (id),  -- the agent that spawned, was refused or drew
    step    INTEGER NOT NULL,
    kind    TEXT NOT NULL,                       -- spawn | refuse | draw
    detail  TEXT NOT NULL,                       -- JSON: child, goal, cap, tokens, cost, totals
    at      REAL NOT NULL,
    PRIMARY KEY (root_id, seq)
);
"""

_V8 = """
-- Compaction: the edits that make the model's view of a long run. The transcript is never
-- rewritten; the view is the messages less the deleted ones, with the summaries added.
CREATE TABLE compactions (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL,                    -- order within the run
    step    INTEGER NOT NULL,                    -- the step the pass ran before
    kind    TEXT NOT NULL,                       -- summary | delete
    message INTEGER,                             -- delete: the message's seq
    text    TEXT,                                -- summary: its text
    at      REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
"""``MIGRATIONS[n]`` takes a store from version ``n`` to ``n + 1``."""

SCHEMA_VERSION = len(MIGRATIONS)


_POSTGRES_TYPES = (
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"),
     "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),  # token counts and micro-units outgrow 32 bits
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),  # PostgreSQL's REAL is 4 bytes
)  # fmt: skip

_POSTGRES_ADDS: dict[int, str] = {
    0: """
-- SQLite numbers every row (rowid): the order runs were stored in, which listings break
-- ties with. PostgreSQL has none, so the runs table keeps its own.
ALTER TABLE runs ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
""",
}
"""What PostgreSQL adds after a migration, keyed as :data:`MIGRATIONS` is."""


def postgres_migration(number: int) -> str:
    """``MIGRATIONS[number]`` in PostgreSQL's types, with what PostgreSQL adds after it."""
    script = MIGRATIONS[number]
    for pattern, replacement in _POSTGRES_TYPES:
        script = pattern.sub(replacement, script)
    return script + _POSTGRES_ADDS.get(number, "")


class NewerFormatError(ResumeError, StorageError):
    """The store was written by a newer io-harness than this one: neither resumable nor
    readable here. Both a :class:`ResumeError` and a :class:`StorageError`."""


def newer_format(location: str, version: int) -> NewerFormatError:
    """The error for a store at ``location`` whose format ``version`` this code does not know."""
    return NewerFormatError(
        f"the store {location} has format {version}, newer than this "
        f"io-harness knows ({SCHEMA_VERSION}); upgrade io-harness to use it"
    )
