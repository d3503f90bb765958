-- kadi:online
-- The poll's claim takes each endpoint's oldest due events, however long
-- another endpoint's backlog in front of them: it walks the endpoints with
-- pending events through this index, and reads a few events of each.
CREATE INDEX ipn_events_endpoint ON ipn_events (merchant_code, mode, next_attempt_at, id, lease_until) WHERE status = 'pending';
