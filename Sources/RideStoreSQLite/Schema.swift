import RideStore

/// The store's schema, as numbered migrations. A file records every version applied in
/// `schema_version` (one row each); its version is the highest. Opening a file applies the
/// missing ones in order, each in its own transaction with its version row, so a crash
/// mid-upgrade leaves the file at the previous version, never in between.
///
/// Never edit a shipped migration: files in the field were made by it. Add a new one.
enum Schema {
    /// The newest version this code knows; a file with a higher one is refused.
    static let current: Int64 = 12

    static let migrations: [(version: Int64, sql: String)] = [
        (1, """
            CREATE TABLE schema_version (
                version    INTEGER PRIMARY KEY,
                applied_at INTEGER NOT NULL       -- Unix seconds
            );
            -- One row per ride: what the start fixed, and when it ended (NULL while open) so
            -- recovery finds the open rides through a small partial index.
            CREATE TABLE rides (
                id         TEXT PRIMARY KEY NOT NULL,
                plan_id    TEXT NOT NULL,
                owner      TEXT,                  -- token sub; NULL when auth is off
                time_limit INTEGER,               -- riding seconds; NULL = none
                started_at INTEGER NOT NULL,      -- Unix ms, same as the start transition
                ended_at   INTEGER                -- Unix ms of the end transition
            ) WITHOUT ROWID;
            CREATE INDEX rides_open ON rides (id) WHERE ended_at IS NULL;
            -- The journal: the ride is these, in seq order (1 = start).
            CREATE TABLE transitions (
                ride_id TEXT NOT NULL REFERENCES rides (id),
                seq     INTEGER NOT NULL,
                kind    TEXT NOT NULL CHECK (kind IN ('start', 'pause', 'resume', 'end')),
                at      INTEGER NOT NULL,         -- Unix ms
                reason  TEXT,                     -- end only: rider, operator, time_limit, pause_limit
                metres  INTEGER,                  -- end only
                PRIMARY KEY (ride_id, seq)
            ) WITHOUT ROWID;
            """),
        (2, """
            -- Exactly-once control: the reply sent for (scope, request id), written in the
            -- same transaction as the transition it answered.
            CREATE TABLE replies (
                scope TEXT NOT NULL,              -- rider sub, '' before auth
                id    TEXT NOT NULL,              -- client request id
                bytes BLOB NOT NULL,              -- the exact reply frame
                at    INTEGER NOT NULL,           -- Unix ms recorded; pruned after 24 h
                PRIMARY KEY (scope, id)
            ) WITHOUT ROWID;
            CREATE INDEX replies_at ON replies (at);
            """),
        (3, """
            -- Each ride's last entry and its state, so an append is checked against one row
            -- (O(1)) instead of by replaying the journal; last_seq also makes appends
            -- optimistic: an entry is written only as exactly the next one.
            ALTER TABLE rides ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 1;
            ALTER TABLE rides ADD COLUMN state TEXT NOT NULL DEFAULT 'riding'
                CHECK (state IN ('riding', 'paused', 'ended'));
            UPDATE rides SET
                last_seq = (SELECT MAX(t.seq) FROM transitions t WHERE t.ride_id = rides.id),
                state = (SELECT CASE t.kind WHEN 'pause' THEN 'paused' WHEN 'end' THEN 'ended' ELSE 'riding' END
                         FROM transitions t WHERE t.ride_id = rides.id ORDER BY t.seq DESC LIMIT 1)
                WHERE EXISTS (SELECT 1 FROM transitions t WHERE t.ride_id = rides.id);
            -- What was asked ("pause r-42"), so a reused request id asking something else is
            -- refused instead of answered with another request's reply. NULL: recorded before.
            ALTER TABLE replies ADD COLUMN request TEXT;
            """),
        (4, """
            -- The operator's ride listing pages by keyset: every ride by start, ended rides
            -- newest first. Without these each page would sort every ride ever recorded.
            CREATE INDEX rides_started ON rides (started_at, id);
            CREATE INDEX rides_ended ON rides (ended_at, id) WHERE ended_at IS NOT NULL;
            """),
        (5, """
            -- Rides in the order they were recorded (n), and journals keyed by that number,
            -- instead of both keyed by the ride's text id: a commit then writes the last pages
            -- of each B-tree, which its neighbours share, rather than a random page of each
            -- per transition. Measured: about 4 random pages written and synced per transition
            -- before, the bytes per fsync that bounded durable transitions/s. The text id keeps
            -- a unique index (written once, at start). Replies likewise: their bytes appended in
            -- order, their key in a unique index of small entries, whose few pages the
            -- checkpoint writes once for many commits instead of a random page of reply rows each.
            CREATE TABLE rides_v5 (
                n          INTEGER PRIMARY KEY,
                id         TEXT NOT NULL UNIQUE,
                plan_id    TEXT NOT NULL,
                owner      TEXT,
                time_limit INTEGER,
                started_at INTEGER NOT NULL,
                ended_at   INTEGER,
                last_seq   INTEGER NOT NULL,
                state      TEXT NOT NULL CHECK (state IN ('riding', 'paused', 'ended'))
            );
            INSERT INTO rides_v5 (id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                SELECT id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state
                FROM rides ORDER BY started_at, id;
            CREATE TABLE transitions_v5 (
                ride   INTEGER NOT NULL REFERENCES rides_v5 (n),
                seq    INTEGER NOT NULL,
                kind   TEXT NOT NULL CHECK (kind IN ('start', 'pause', 'resume', 'end')),
                at     INTEGER NOT NULL,
                reason TEXT,
                metres INTEGER,
                PRIMARY KEY (ride, seq)
            ) WITHOUT ROWID;
            INSERT INTO transitions_v5 (ride, seq, kind, at, reason, metres)
                SELECT r.n, t.seq, t.kind, t.at, t.reason, t.metres
                FROM transitions t JOIN rides_v5 r ON r.id = t.ride_id ORDER BY r.n, t.seq;
            DROP TABLE transitions;
            DROP TABLE rides;
            ALTER TABLE rides_v5 RENAME TO rides;
            ALTER TABLE transitions_v5 RENAME TO transitions;
            CREATE INDEX rides_open ON rides (n) WHERE ended_at IS NULL;
            CREATE INDEX rides_started ON rides (started_at, id);
            CREATE INDEX rides_ended ON rides (ended_at, id) WHERE ended_at IS NOT NULL;
            CREATE TABLE replies_v5 (
                n       INTEGER PRIMARY KEY,
                scope   TEXT NOT NULL,
                id      TEXT NOT NULL,
                bytes   BLOB NOT NULL,
                at      INTEGER NOT NULL,
                request TEXT
            );
            INSERT INTO replies_v5 (scope, id, bytes, at, request)
                SELECT scope, id, bytes, at, request FROM replies ORDER BY at, scope, id;
            DROP TABLE replies;
            ALTER TABLE replies_v5 RENAME TO replies;
            CREATE UNIQUE INDEX replies_key ON replies (scope, id);
            CREATE INDEX replies_at ON replies (at);
            """),
        (6, """
            -- Replies are pruned oldest first in the order recorded (n), which is the order of
            -- `at` (each group records its replies at one instant, groups commit in order), so
            -- the index on `at` only cost every transition one more B-tree insert.
            DROP INDEX replies_at;
            """),
        (7, """
            -- Webhook deliveries owed, one row per event and endpoint, inserted in the
            -- transaction of the transition they describe and deleted once delivered. seq
            -- (the rowid) is commit order; a lane (endpoint, ride) is sent in seq order, head
            -- first, which the lane index finds without reading the bodies.
            CREATE TABLE webhook_outbox (
                -- AUTOINCREMENT: a seq is never reused, even after the highest row went dead,
                -- so a dead row's seq stays its name in webhook_dead.
                seq             INTEGER PRIMARY KEY AUTOINCREMENT,
                event_id        TEXT NOT NULL,
                type            TEXT NOT NULL,
                ride            TEXT NOT NULL,
                endpoint        TEXT NOT NULL,
                created         INTEGER NOT NULL,     -- Unix ms
                body            BLOB NOT NULL,        -- the exact POST body
                attempts        INTEGER NOT NULL,
                next_attempt_at INTEGER NOT NULL,     -- Unix ms
                last_result     TEXT
            );
            CREATE INDEX webhook_outbox_lane ON webhook_outbox (endpoint, ride, seq);
            -- Deliveries given up on (past the retry window), for ops to list; never sent again.
            CREATE TABLE webhook_dead (
                seq         INTEGER PRIMARY KEY,      -- as it was in webhook_outbox
                event_id    TEXT NOT NULL,
                type        TEXT NOT NULL,
                ride        TEXT NOT NULL,
                endpoint    TEXT NOT NULL,
                created     INTEGER NOT NULL,
                body        BLOB NOT NULL,
                attempts    INTEGER NOT NULL,
                last_result TEXT,
                died_at     INTEGER NOT NULL          -- Unix ms
            );
            """),
        (8, """
            -- Each ride's trace checkpoint (issue 28): the distance along its accepted positions
            -- and the last one, overwritten at every transition and every checkpoint (at most
            -- every 30 s while it changes), so a crash loses at most that much trace. Doubles
            -- as text: Swift's shortest round-tripping form reads back bit for bit.
            CREATE TABLE traces (
                ride        INTEGER PRIMARY KEY REFERENCES rides (n),
                metres      INTEGER NOT NULL,
                lat         TEXT,
                lon         TEXT,
                at          INTEGER,              -- Unix ms of the fix (the device's clock)
                accuracy    TEXT,
                received_at INTEGER,              -- Unix ms the server received it
                vehicle_type TEXT                 -- GBFS vehicle type id the ride started with
            );
            """),
        (9, """
            -- Retention (--retain-ended, docs/retention.md): the file gives back the pages a purge
            -- frees (PRAGMA incremental_vacuum after each batch) instead of keeping them for
            -- reuse. A new file is made auto_vacuum = INCREMENTAL before its first table; an
            -- older file only becomes so through a VACUUM, which cannot run in a transaction:
            -- SQLiteStore.vacuumIntoIncremental runs it just after this migration (and at every
            -- open of a version-9 file that is not incremental yet, should it have been cut short).
            -- A purge deletes the given-up deliveries of the rides it deletes, found by ride.
            CREATE INDEX webhook_dead_ride ON webhook_dead (ride);
            """),
        (10, """
            -- Push targets (issue 38, docs/push.md): a ride's Live Activities and notification
            -- tokens, and each rider's push-to-start tokens (ride NULL). n is registration
            -- order: past 4 per ride or per rider the lowest n goes. Keyed by the ride's text
            -- id, not rides.n: the sender reads them by ride and a target outlives nothing.
            CREATE TABLE push_targets (
                n        INTEGER PRIMARY KEY,
                ride     TEXT,
                rider    TEXT NOT NULL,          -- token sub; '' when auth is off
                platform TEXT NOT NULL CHECK (platform IN ('apns', 'fcm')),
                kind     TEXT NOT NULL CHECK (kind IN ('liveactivity', 'push_to_start', 'notification')),
                token    TEXT NOT NULL,
                at       INTEGER NOT NULL        -- Unix ms registered
            );
            CREATE INDEX push_targets_ride ON push_targets (ride, n) WHERE ride IS NOT NULL;
            CREATE INDEX push_targets_rider ON push_targets (rider, n) WHERE ride IS NULL;
            """),
        (11, """
            -- The event log (GET /v1/events, docs/webhooks.md): every event once, whatever its
            -- endpoints, kept 30 days after its commit for reconciliation. Written by the
            -- outbox insert itself, so no write path can forget it; a dead event put back in
            -- the outbox is already there.
            CREATE TABLE webhook_events (
                seq      INTEGER PRIMARY KEY AUTOINCREMENT,
                event_id TEXT NOT NULL UNIQUE,
                type     TEXT NOT NULL,
                ride     TEXT NOT NULL,
                created  INTEGER NOT NULL,       -- Unix ms of the commit
                body     BLOB NOT NULL           -- the bytes POSTed
            );
            CREATE INDEX webhook_events_ride ON webhook_events (ride, seq);
            CREATE INDEX webhook_events_created ON webhook_events (created);
            -- NOT EXISTS, not OR IGNORE: the outbox insert's own OR ROLLBACK would override a
            -- conflict clause here and roll the whole group back at an event's second endpoint.
            CREATE TRIGGER webhook_events_log AFTER INSERT ON webhook_outbox BEGIN
                INSERT INTO webhook_events (event_id, type, ride, created, body)
                SELECT NEW.event_id, NEW.type, NEW.ride, NEW.created, NEW.body
                WHERE NOT EXISTS (SELECT 1 FROM webhook_events WHERE event_id = NEW.event_id);
            END;
            """),
        (12, """
            -- Device-push intents share the outbox (endpoint 'push:', docs/push.md) but are not
            -- webhook events: the log leaves them out.
            DROP TRIGGER webhook_events_log;
            CREATE TRIGGER webhook_events_log AFTER INSERT ON webhook_outbox WHEN NEW.endpoint <> 'push:' BEGIN
                INSERT INTO webhook_events (event_id, type, ride, created, body)
                SELECT NEW.event_id, NEW.type, NEW.ride, NEW.created, NEW.body
                WHERE NOT EXISTS (SELECT 1 FROM webhook_events WHERE event_id = NEW.event_id);
            END;
            """),
    ]
}
