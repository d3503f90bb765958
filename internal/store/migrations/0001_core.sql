-- Portable SQL: runs unchanged on SQLite and PostgreSQL. Times are unix
-- milliseconds; 0 means "never". Amounts are integer minor units.
CREATE TABLE merchants (
    code               TEXT PRIMARY KEY,
    name               TEXT NOT NULL,
    password_hash      TEXT NOT NULL,
    biller_code        TEXT NOT NULL,
    service_id         TEXT NOT NULL,
    system_code        TEXT NOT NULL,
    settlement_account TEXT NOT NULL,
    created_at         BIGINT NOT NULL
);

CREATE TABLE outlets (
    code          TEXT PRIMARY KEY,
    merchant_code TEXT NOT NULL REFERENCES merchants (code)
);
CREATE INDEX outlets_merchant ON outlets (merchant_code);

CREATE TABLE merchant_settings (
    merchant_code       TEXT NOT NULL REFERENCES merchants (code),
    mode                TEXT NOT NULL,
    notification_secret TEXT NOT NULL,
    ipn_url             TEXT NOT NULL DEFAULT '',
    ipn_username        TEXT NOT NULL DEFAULT '',
    ipn_password        TEXT NOT NULL DEFAULT '',
    ipn_disabled_at     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (merchant_code, mode)
);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    merchant_code TEXT NOT NULL REFERENCES merchants (code),
    mode          TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX api_keys_revoked ON api_keys (revoked_at);

CREATE TABLE auth_failures (
    subject      TEXT PRIMARY KEY,
    failures     INTEGER NOT NULL,
    first_at     BIGINT NOT NULL,
    locked_until BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE audit_events (
    id            TEXT PRIMARY KEY,
    at            BIGINT NOT NULL,
    merchant_code TEXT NOT NULL,
    actor         TEXT NOT NULL,
    action        TEXT NOT NULL,
    detail        TEXT NOT NULL
);
CREATE INDEX audit_events_merchant ON audit_events (merchant_code, at);

CREATE TABLE bills (
    reference       TEXT PRIMARY KEY,
    merchant_code   TEXT NOT NULL REFERENCES merchants (code),
    mode            TEXT NOT NULL,
    order_ref       TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    customer_name   TEXT NOT NULL,
    biller_code     TEXT NOT NULL,
    outlet          TEXT NOT NULL,
    amount_minor    BIGINT NOT NULL,
    currency        TEXT NOT NULL,
    description     TEXT NOT NULL,
    state           TEXT NOT NULL,
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    expires_at      BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (merchant_code, mode, order_ref)
);

CREATE TABLE payments (
    id               TEXT PRIMARY KEY,
    bill_ref         TEXT NOT NULL REFERENCES bills (reference),
    merchant_code    TEXT NOT NULL,
    mode             TEXT NOT NULL,
    status           TEXT NOT NULL,
    amount_minor     BIGINT NOT NULL,
    currency         TEXT NOT NULL,
    card_brand       TEXT NOT NULL,
    card_first6      TEXT NOT NULL,
    card_last4       TEXT NOT NULL,
    card_exp_month   INTEGER NOT NULL,
    card_exp_year    INTEGER NOT NULL,
    card_holder      TEXT NOT NULL,
    card_fingerprint TEXT NOT NULL,
    network_ref      TEXT NOT NULL DEFAULT '',
    approval_code    TEXT NOT NULL DEFAULT '',
    decline_code     TEXT NOT NULL DEFAULT '',
    message          TEXT NOT NULL DEFAULT '',
    challenge_ref    TEXT NOT NULL DEFAULT '',
    callback_url     TEXT NOT NULL,
    mobile_number    TEXT NOT NULL DEFAULT '',
    email_address    TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX payments_bill ON payments (bill_ref, created_at);
CREATE INDEX payments_unsettled ON payments (status, updated_at);
-- The database itself refuses a second successful charge for a bill.
CREATE UNIQUE INDEX payments_one_success ON payments (bill_ref) WHERE status = 'succeeded';

CREATE TABLE ipn_events (
    id              TEXT PRIMARY KEY,
    merchant_code   TEXT NOT NULL,
    mode            TEXT NOT NULL,
    payment_id      TEXT NOT NULL REFERENCES payments (id),
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_owner     TEXT NOT NULL DEFAULT '',
    lease_until     BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    delivered_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX ipn_events_due ON ipn_events (status, next_attempt_at);
CREATE INDEX ipn_events_merchant ON ipn_events (merchant_code, mode, created_at);
