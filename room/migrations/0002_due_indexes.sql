-- The writer asks after every batch when the next time-based rule falls due
-- (Engine.NextDue), and the sweeper purges terminal tasks one TTL after their
-- last update. Both are about last_updated_at + ttl_ms, which the index on
-- last_updated_at alone cannot order, so each asked for a walk over every
-- finished task: the cost grew with the sidecar. An index on the expression
-- itself answers min() and the purge range directly.
CREATE INDEX tasks_purge_due ON tasks(last_updated_at + ttl_ms)
  WHERE status IN ('completed','failed','cancelled');
CREATE INDEX tasks_expiry_due ON tasks(created_at + ttl_ms)
  WHERE status IN ('working','input_required');
