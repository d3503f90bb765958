-- What Kadi's card page shows again after a refused attempt (field errors,
-- the decline, the typed name and expiry; never the card number or CVV),
-- as JSON sealed under the master key. Pages are reached by GET after a
-- POST (docs/hosted-form.md), so this state cannot live in the response.
ALTER TABLE checkout_sessions ADD COLUMN notice TEXT NOT NULL DEFAULT '';
