-- IPN delivery log. Portable SQL like 0001: times are unix milliseconds.
-- last_error says why an event is still pending or failed; replays counts
-- the rounds an operator started again (attempts counts the current one).
ALTER TABLE ipn_events ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE ipn_events ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;

-- Every request made to a receiver, successful or not. seq numbers an
-- event's attempts over its whole life, replays included. status_code is 0
-- when no HTTP answer came; response holds at most 1 KiB of the body.
CREATE TABLE ipn_attempts (
    event_id     TEXT NOT NULL REFERENCES ipn_events (id),
    seq          INTEGER NOT NULL,
    attempted_at BIGINT NOT NULL,
    url          TEXT NOT NULL,
    status_code  INTEGER NOT NULL,
    latency_us   BIGINT NOT NULL,
    error        TEXT NOT NULL,
    response     TEXT NOT NULL,
    PRIMARY KEY (event_id, seq)
);
