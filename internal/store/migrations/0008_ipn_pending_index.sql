-- kadi:online
-- A claim scans the oldest due events (docs/performance.md). This index
-- holds pending events only, with every column the scan reads, so the scan
-- never visits the table; a delivered or failed event leaves it instead of
-- moving within it. Failed events, which the queue gauges count, get an
-- index of their own. The index it replaces goes last, so that claims keep
-- one while the new ones are built.
CREATE INDEX ipn_events_pending ON ipn_events (next_attempt_at, id, merchant_code, mode, lease_until, created_at)
    WHERE status = 'pending';
CREATE INDEX ipn_events_failed ON ipn_events (created_at) WHERE status = 'failed';
DROP INDEX ipn_events_due;
