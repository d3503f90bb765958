-- The origins (scheme://host[:port]) a mode's hosted-form results may be
-- sent back to, space-separated; empty: any the form names, as before.
-- The spec puts callbackUrl in the shopper's browser with a token that
-- pays any of the merchant's bills: without a list, whoever reads a shop's
-- page can send a genuine payment page's result to a site of their own.
ALTER TABLE merchant_settings ADD COLUMN callback_origins TEXT NOT NULL DEFAULT '';
