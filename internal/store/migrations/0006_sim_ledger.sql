-- The simulated acquirer's own record of each charge, by the gateway's
-- payment id (its idempotency key). A real acquirer keeps this at the bank;
-- the simulator keeps it here, written in its own transactions before it
-- answers, so that a gateway that crashes between the acquirer's answer and
-- its own record is reconciled to what the "bank" did (docs/operations.md).
-- No card data: the outcome and references only.
CREATE TABLE sim_ledger (
    payment_id    TEXT PRIMARY KEY,
    outcome       TEXT NOT NULL,
    network_ref   TEXT NOT NULL DEFAULT '',
    approval_code TEXT NOT NULL DEFAULT '',
    decline_code  TEXT NOT NULL DEFAULT '',
    message       TEXT NOT NULL DEFAULT '',
    challenge_ref TEXT NOT NULL DEFAULT '',
    recorded_at   BIGINT NOT NULL
);
