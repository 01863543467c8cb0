-- Token counts a request's model calls did not report are unknown, not 0: the three count columns
-- become Nullable (NULL: some model call of the request reported no such count). tokens_estimated
-- is 1 when a count is an instrumentation's estimate rather than the provider's usage (OpenLIT
-- writes ceil(characters / 2) when a stream carried no usage). See docs/conventions.md.
-- Rows stored before this migration keep their values: an unknown count stored as 0 stays 0.

-- Columns first, codecs after: on a cluster a column change goes to both the local and the
-- Distributed table, a codec only to the local one (ddl.py), so they are separate statements.
ALTER TABLE {database}.requests
    MODIFY COLUMN input_tokens Nullable(Int64),
    MODIFY COLUMN output_tokens Nullable(Int64),
    MODIFY COLUMN cache_read_input_tokens Nullable(Int64),
    ADD COLUMN IF NOT EXISTS tokens_estimated UInt8 DEFAULT 0 AFTER cache_read_input_tokens;

ALTER TABLE {database}.requests
    MODIFY COLUMN input_tokens Nullable(Int64) CODEC(T64),
    MODIFY COLUMN output_tokens Nullable(Int64) CODEC(T64),
    MODIFY COLUMN cache_read_input_tokens Nullable(Int64) CODEC(T64);

-- The rollup's token sums now leave out unknown and estimated counts (rollup.sum_columns): hours
-- built before would mix both rules, so every hour is marked touched and read from the request
-- rows until the next refresh rebuilds it.
INSERT INTO {database}.requests_touched
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
