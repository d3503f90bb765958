-- The keys that sealed this database's secrets, by id, with a fingerprint
-- of each (secret.Sealer.KeyCheck). A copy of the ring that lacks the
-- newest key (a node behind a rotation) still shares an older key's
-- fingerprint; another install's ring, whose first key has the same id,
-- does not, and is refused before it seals anything.
CREATE TABLE sealing_keys (
  key_id TEXT PRIMARY KEY,
  key_check TEXT NOT NULL,
  recorded_at BIGINT NOT NULL
);
