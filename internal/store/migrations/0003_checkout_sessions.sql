-- Checkout sessions: the hosted pages' server-side state after the first
-- POST /cardPay (docs/security.md). Only the hash of a session's id is
-- stored. fields holds the merchant's form fields as a JSON object: no
-- token, no card data. payment_id names the payment waiting for this
-- session's 3-D Secure code ('' when none); entry_page is 1 for a session
-- of Kadi's own card-entry page (where a decline may be retried), 0 for one
-- made only to carry a merchant-posted form's 3-D Secure challenge. Times
-- are unix milliseconds.
CREATE TABLE checkout_sessions (
    id_hash       TEXT PRIMARY KEY,
    merchant_code TEXT NOT NULL,
    mode          TEXT NOT NULL,
    bill_ref      TEXT NOT NULL REFERENCES bills (reference),
    fields        TEXT NOT NULL,
    payment_id    TEXT NOT NULL DEFAULT '',
    entry_page    INTEGER NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX checkout_sessions_expiry ON checkout_sessions (expires_at);
