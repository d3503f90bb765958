-- The run of the node that charges a payment while it is processing
-- (payment.Service.Node: the node's name, a slash, the run's id). When a
-- node restarts after a crash it reconciles its earlier run's payments at
-- once, rather than after the cutoff that keeps nodes off each other's
-- charges in flight.
ALTER TABLE payments ADD COLUMN node TEXT NOT NULL DEFAULT '';
