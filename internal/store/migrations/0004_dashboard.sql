-- The merchant dashboard (docs/dashboard.md). Portable SQL; times are unix
-- milliseconds. Only hashes of session ids and recovery codes are stored;
-- the TOTP secret is sealed like the notification secret.
CREATE TABLE dashboard_sessions (
    id_hash        TEXT PRIMARY KEY,
    merchant_code  TEXT NOT NULL REFERENCES merchants (code),
    mode           TEXT NOT NULL,
    csrf           TEXT NOT NULL,
    second_factor  BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    last_seen_at   BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_merchant ON dashboard_sessions (merchant_code);

ALTER TABLE merchants ADD COLUMN totp_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE merchants ADD COLUMN totp_enabled_at BIGINT NOT NULL DEFAULT 0;

CREATE TABLE recovery_codes (
    merchant_code TEXT NOT NULL REFERENCES merchants (code),
    code_hash     TEXT NOT NULL,
    used_at       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (merchant_code, code_hash)
);

-- An API key's first characters, shown in the dashboard in place of the key.
ALTER TABLE api_keys ADD COLUMN prefix TEXT NOT NULL DEFAULT '';

-- The payments list: a merchant's bills in one mode, newest first, paged by
-- (created_at, reference).
CREATE INDEX bills_list ON bills (merchant_code, mode, created_at, reference);
CREATE INDEX bills_state_list ON bills (merchant_code, mode, state, created_at, reference);
CREATE INDEX payments_last4 ON payments (merchant_code, mode, card_last4);
CREATE INDEX payments_merchant_time ON payments (merchant_code, mode, updated_at);
