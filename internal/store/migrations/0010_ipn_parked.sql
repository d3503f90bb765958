-- kadi:online
-- Parked events wait for their merchant to save an IPN configuration,
-- which sends the recent ones: this index finds them without reading the
-- merchant's other events. Delivered events, the most of them, are not in it.
CREATE INDEX ipn_events_parked ON ipn_events (merchant_code, mode, created_at) WHERE status = 'parked';
