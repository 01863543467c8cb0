-- Which trace ids each granule of spans holds, exactly: a set index over trace_id, one per granule.
-- The sorting key (project, trace_id, span_id) cannot exclude a granule for a trace id that falls
-- inside its range, and OpenTelemetry's trace ids are random: a batch's 1,600 new traces fall inside
-- nearly every granule's range. The set can: the reads after an insert (the read-back, the stamps)
-- then read the granules that hold the batch's traces, not all of them (docs/collector.md,
-- "Reads by trace id grow with the spans stored"). A granule holds at most 8,192 rows, so at most
-- 8,192 ids: the set is never full. About 3 bytes a span. A bloom filter is a tenth of that, but
-- probed with 1,600 ids it kept 73 of 470 granules that held none of them (4 M spans stored).
-- Parts written before this migration have no set; they gain one when they are merged.
ALTER TABLE {database}.spans ADD INDEX IF NOT EXISTS trace_id_set trace_id TYPE set(8192) GRANULARITY 1;
