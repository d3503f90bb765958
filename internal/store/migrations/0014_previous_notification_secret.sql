-- The notification secret a rotation replaced, sealed as the current one
-- is, and until when (Unix ms) it still signs notifications beside the new
-- one: a receiver then has that long to take the new secret instead of
-- refusing every notification from the moment of the rotation.
ALTER TABLE merchant_settings ADD COLUMN previous_notification_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE merchant_settings ADD COLUMN previous_secret_until BIGINT NOT NULL DEFAULT 0;
