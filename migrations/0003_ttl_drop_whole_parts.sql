-- Retention: LATENCYLENS_SPANS_RETENTION_DAYS / LATENCYLENS_REQUESTS_RETENTION_DAYS become
-- `TTL toDateTime(start_time) + toIntervalDay(N)` on these tables, set (or changed, or removed)
-- by the migrator at every start-up. Tables are partitioned by day, so expired data leaves as
-- whole parts: cheap drops instead of rewrites.
ALTER TABLE {database}.spans MODIFY SETTING ttl_only_drop_parts = 1;
ALTER TABLE {database}.requests MODIFY SETTING ttl_only_drop_parts = 1;
