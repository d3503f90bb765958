-- The last TOTP time step a sign-in was accepted with: a code is good for
-- its step and the two beside it, and RFC 6238 (5.2) asks that once used it
-- is not accepted again, in this session or another.
ALTER TABLE merchants ADD COLUMN totp_last_step BIGINT NOT NULL DEFAULT 0;
