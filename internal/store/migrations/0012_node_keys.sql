-- The master key each node signs tokens and seals values with, as its id
-- and a check that tells keys sharing an id apart (keyring.KeyCheck: an
-- HMAC of the key, which reveals nothing of it), and when the node last
-- said so, by the database's clock. A node whose ring lacks a key another
-- live node signs with refuses that node's tokens: it reads this table and
-- answers /readyz "not ready" until it has the key (PostgreSQL only; one
-- SQLite file has one node).
CREATE TABLE node_keys (
  node TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  key_check TEXT NOT NULL,
  seen_at BIGINT NOT NULL
);
