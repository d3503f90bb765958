-- Which run of the node last published its key. A node that finds another
-- run's mark on its own row after its first publish shares its name with
-- a live node: each would settle the other's charges in flight as its own
-- crashed run's, so it stops settling its earlier runs' payments at once.
ALTER TABLE node_keys ADD COLUMN run TEXT NOT NULL DEFAULT '';
