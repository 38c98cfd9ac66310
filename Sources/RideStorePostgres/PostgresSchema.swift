import RideStore

/// The PostgreSQL store's schema, as numbered migrations, in its own PostgreSQL schema
/// `ridepush` so it can share a database with the operator's billing tables. Every version
/// applied is a row of `ridepush.schema_version`; the database's version is the highest.
/// All missing migrations run in one transaction under an advisory lock, so nodes starting
/// together upgrade once and a crash mid-upgrade leaves the previous version.
///
/// Never edit a shipped migration: databases in the field were made by it. Add a new one.
enum PostgresSchema {
    /// The newest version this code knows; a database with a higher one is refused.
    static let current: Int64 = 8

    /// Serializes migrations across nodes (any constant; "ridepush" in ASCII, as a number).
    static let migrationLock: Int64 = 0x7269_6465_7075_7368

    static let migrations: [(version: Int64, sql: String)] = [
        (1, """
            CREATE TABLE ridepush.schema_version (
                version    integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            -- One row per ride: what the start fixed, when it ended (NULL while open, so a
            -- starting node finds the open rides through a small partial index), and the
            -- number and resulting state of its last journal entry, which an append is
            -- checked against under the row's lock (optimistic concurrency across nodes, one
            -- row read however long the journal).
            CREATE TABLE ridepush.rides (
                id         text PRIMARY KEY,
                plan_id    text NOT NULL,
                owner      text,                   -- token sub; NULL when auth is off
                time_limit bigint,                 -- riding seconds; NULL = none
                started_at bigint NOT NULL,        -- Unix ms, same as the start entry
                ended_at   bigint,                 -- Unix ms of the end entry
                last_seq   integer NOT NULL CHECK (last_seq >= 1),
                state      text NOT NULL CHECK (state IN ('riding', 'paused', 'ended'))
            );
            CREATE INDEX rides_open ON ridepush.rides (id) WHERE ended_at IS NULL;
            -- The journal: a ride is its entries in seq order (1 = start). txid and position
            -- order the whole journal for the nodes' catch-up reads: a reader takes only
            -- entries of transactions older than every transaction still running
            -- (pg_snapshot_xmin), so an entry that commits late is never skipped.
            CREATE TABLE ridepush.journal (
                ride_id  text NOT NULL REFERENCES ridepush.rides (id),
                seq      integer NOT NULL CHECK (seq >= 1),
                kind     text NOT NULL CHECK (kind IN ('start', 'pause', 'resume', 'end')),
                at       bigint NOT NULL,          -- Unix ms
                reason   text CHECK (reason IN ('rider', 'time_limit', 'pause_limit')),
                metres   bigint,
                txid     xid8 NOT NULL DEFAULT pg_current_xact_id(),
                position bigint GENERATED ALWAYS AS IDENTITY,
                PRIMARY KEY (ride_id, seq),
                CHECK ((kind = 'end') = (reason IS NOT NULL AND metres IS NOT NULL))
            );
            CREATE INDEX journal_feed ON ridepush.journal (txid, position);
            -- Exactly-once control: the reply sent for (scope, request id), written in the
            -- same transaction as the entry it answered. bytea, not text: a token sub or a
            -- request id may hold any character, NUL included.
            CREATE TABLE ridepush.replies (
                scope bytea NOT NULL,              -- rider sub, empty before auth
                id    bytea NOT NULL,              -- client request id
                request text NOT NULL,             -- what was asked ("pause r-42")
                bytes bytea NOT NULL,              -- the exact reply frame
                at    bigint NOT NULL,             -- Unix ms recorded; pruned after 24 h
                PRIMARY KEY (scope, id)
            );
            CREATE INDEX replies_at ON ridepush.replies (at);
            """),
        (2, """
            -- The operator's ride listing pages by keyset: every ride by start, ended rides
            -- newest first. Ids in byte order (COLLATE "C"), as the other stores compare
            -- them, so a cursor means the same on every node whatever the database's locale.
            CREATE INDEX rides_started ON ridepush.rides (started_at, (id COLLATE "C"));
            CREATE INDEX rides_ended ON ridepush.rides (ended_at, (id COLLATE "C")) WHERE ended_at IS NOT NULL;
            """),
        (3, """
            -- Rides an operator ended say so on their receipt ('operator').
            ALTER TABLE ridepush.journal DROP CONSTRAINT journal_reason_check;
            ALTER TABLE ridepush.journal ADD CONSTRAINT journal_reason_check
                CHECK (reason IN ('rider', 'operator', 'time_limit', 'pause_limit'));
            """),
        (4, """
            -- Webhook deliveries owed, one row per event and endpoint, inserted in the
            -- transaction of the transition they describe (after the ride's row lock, so within
            -- a ride seq is commit order) and deleted once delivered. A node sends a row only
            -- while it holds its lease (lease_owner until lease_until, Unix ms): claimed with
            -- FOR UPDATE SKIP LOCKED, renewed at every read, taken over by another node once it
            -- expires (the holder died or lost PostgreSQL).
            CREATE TABLE ridepush.webhook_outbox (
                seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                event_id        text NOT NULL,
                type            text NOT NULL,
                ride            text NOT NULL,
                endpoint        text NOT NULL,
                created         bigint NOT NULL,
                body            bytea NOT NULL,
                attempts        integer NOT NULL DEFAULT 0,
                next_attempt_at bigint NOT NULL,
                last_result     text,
                lease_owner     text,
                lease_until     bigint
            );
            CREATE INDEX webhook_outbox_lane ON ridepush.webhook_outbox (endpoint, ride, seq);
            -- Deliveries given up on (past the retry window), for ops to list; never sent again.
            CREATE TABLE ridepush.webhook_dead (
                seq         bigint PRIMARY KEY,
                event_id    text NOT NULL,
                type        text NOT NULL,
                ride        text NOT NULL,
                endpoint    text NOT NULL,
                created     bigint NOT NULL,
                body        bytea NOT NULL,
                attempts    integer NOT NULL,
                last_result text,
                died_at     bigint NOT NULL
            );
            """),
        (5, """
            -- Each ride's trace checkpoint (issue 28): the distance along its accepted positions
            -- and the last one, overwritten at every transition and every checkpoint (at most
            -- every 30 s while it changes), so a crash loses at most that much trace.
            CREATE TABLE ridepush.traces (
                ride_id     text PRIMARY KEY REFERENCES ridepush.rides (id),
                metres      bigint NOT NULL,
                lat         float8,
                lon         float8,
                at          bigint,                -- Unix ms of the fix (the device's clock)
                accuracy    float8,
                received_at bigint,                -- Unix ms the server received it
                vehicle_type text                  -- GBFS vehicle type id the ride started with
            );
            -- An operator's end where the zone rules refused it (`force`) says so on its receipt.
            ALTER TABLE ridepush.journal DROP CONSTRAINT IF EXISTS journal_reason_check;
            ALTER TABLE ridepush.journal ADD CONSTRAINT journal_reason_check
                CHECK (reason IN ('rider', 'operator', 'operator_forced', 'time_limit', 'pause_limit'));
            """),
        (6, """
            -- Push targets (issue 38, docs/push.md): a ride's Live Activities and notification
            -- tokens, and each rider's push-to-start tokens (ride NULL). n is registration
            -- order: past 4 per ride or per rider the lowest n goes (under an advisory lock
            -- on the slot, so two nodes registering at once cannot both keep a fifth).
            CREATE TABLE ridepush.push_targets (
                n        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                ride     text,
                rider    text NOT NULL,           -- token sub; '' when auth is off
                platform text NOT NULL CHECK (platform IN ('apns', 'fcm')),
                kind     text NOT NULL CHECK (kind IN ('liveactivity', 'push_to_start', 'notification')),
                token    text NOT NULL,
                at       bigint NOT NULL          -- Unix ms registered
            );
            CREATE INDEX push_targets_ride ON ridepush.push_targets (ride, n) WHERE ride IS NOT NULL;
            CREATE INDEX push_targets_rider ON ridepush.push_targets (rider, n) WHERE ride IS NULL;
            """),
        (7, """
            -- The event log (GET /v1/events, docs/webhooks.md): every event once, whatever its
            -- endpoints, kept 30 days for reconciliation; written by the outbox insert itself.
            CREATE TABLE ridepush.webhook_events (
                seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                event_id text NOT NULL UNIQUE,
                type     text NOT NULL,
                ride     text NOT NULL,
                created  bigint NOT NULL,
                body     bytea NOT NULL
            );
            CREATE INDEX webhook_events_ride ON ridepush.webhook_events (ride, seq);
            CREATE INDEX webhook_events_created ON ridepush.webhook_events (created);
            CREATE FUNCTION ridepush.webhook_events_log() RETURNS trigger LANGUAGE plpgsql AS $f$
            BEGIN
                INSERT INTO ridepush.webhook_events (event_id, type, ride, created, body)
                VALUES (NEW.event_id, NEW.type, NEW.ride, NEW.created, NEW.body) ON CONFLICT (event_id) DO NOTHING;
                RETURN NULL;
            END $f$;
            CREATE TRIGGER webhook_events_log AFTER INSERT ON ridepush.webhook_outbox
                FOR EACH ROW EXECUTE FUNCTION ridepush.webhook_events_log();
            """),
        (8, """
            -- Device-push intents share the outbox (endpoint 'push:', docs/push.md) but are not
            -- webhook events: the log leaves them out.
            DROP TRIGGER webhook_events_log ON ridepush.webhook_outbox;
            CREATE TRIGGER webhook_events_log AFTER INSERT ON ridepush.webhook_outbox
                FOR EACH ROW WHEN (NEW.endpoint <> 'push:') EXECUTE FUNCTION ridepush.webhook_events_log();
            """),
    ]
}
