-- Request rows versioned by what they saw, tombstones, and lost roots (docs/deployment.md,
-- "Consistency"). `requests` was ReplacingMergeTree(computed_at): the latest collector clock won,
-- whatever that computation saw. Now:
--   version      distinct spans seen (high 22 bits), then the latest insert stamp of those spans
--                as ClickHouse stamped it (ms since 2020, low 42 bits), see analysis/request_rows.py
--   is_deleted   1 on a tombstone: the row under this key (start_time) is gone, the trace's row
--                lives under another start time (its root changed). FINAL hides both
--   root_missing 1 when the trace's root never arrived and the row is rooted at its top-most span.
-- ClickHouse cannot change a table's engine in place: the rows are copied into a new table that
-- then takes the name. Rows stored before keep their numbers; their version comes from their span
-- count and computed_at. A trace that already had rows under two start times keeps both until a
-- span of it arrives again. The old table stays as requests_before_0015 (same retention); drop
-- it once the new one is checked. A second process running this migration at the same moment
-- fails at the RENAME (the names are taken) and finds it applied when it retries.
CREATE TABLE IF NOT EXISTS {database}.requests_0015
(
    project LowCardinality(String) DEFAULT 'default',
    trace_id FixedString(16),
    start_time DateTime64(9, 'UTC'),
    e2e_ns Int64 CODEC(T64),
    service LowCardinality(String),
    name String,
    model LowCardinality(String),
    provider LowCardinality(String),
    status_error UInt8,
    retrieval_ns Int64 CODEC(T64),
    tool_ns Int64 CODEC(T64),
    app_other_ns Int64 CODEC(T64),
    network_ns Int64 CODEC(T64),
    queue_ns Int64 CODEC(T64),
    prefill_ns Int64 CODEC(T64),
    decode_ns Int64 CODEC(T64),
    inference_ns Int64 CODEC(T64),
    server_other_ns Int64 CODEC(T64),
    model_unattributed_ns Int64 CODEC(T64),
    busy_retrieval_ns Int64 CODEC(T64),
    busy_tool_ns Int64 CODEC(T64),
    busy_app_other_ns Int64 CODEC(T64),
    busy_network_ns Int64 CODEC(T64),
    busy_queue_ns Int64 CODEC(T64),
    busy_prefill_ns Int64 CODEC(T64),
    busy_decode_ns Int64 CODEC(T64),
    busy_inference_ns Int64 CODEC(T64),
    busy_server_other_ns Int64 CODEC(T64),
    busy_model_unattributed_ns Int64 CODEC(T64),
    provenance Map(LowCardinality(String), LowCardinality(String)),
    inconsistent UInt8,
    input_tokens Nullable(Int64) CODEC(T64),
    output_tokens Nullable(Int64) CODEC(T64),
    cache_read_input_tokens Nullable(Int64) CODEC(T64),
    tokens_estimated UInt8 DEFAULT 0,
    ttft_ns Nullable(Int64) CODEC(T64),
    itl_ns Nullable(Int64) CODEC(T64),
    decode_tokens_per_second Nullable(Float64),
    model_calls UInt16,
    span_count UInt32,
    computed_at DateTime64(6),
    version UInt64,
    is_deleted UInt8,
    root_missing UInt8 DEFAULT 0
)
ENGINE = ReplacingMergeTree(version, is_deleted)
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (project, start_time, trace_id)
SETTINGS ttl_only_drop_parts = 1;

INSERT INTO {database}.requests_0015 (
    project,
    trace_id,
    start_time,
    e2e_ns,
    service,
    name,
    model,
    provider,
    status_error,
    retrieval_ns,
    tool_ns,
    app_other_ns,
    network_ns,
    queue_ns,
    prefill_ns,
    decode_ns,
    inference_ns,
    server_other_ns,
    model_unattributed_ns,
    busy_retrieval_ns,
    busy_tool_ns,
    busy_app_other_ns,
    busy_network_ns,
    busy_queue_ns,
    busy_prefill_ns,
    busy_decode_ns,
    busy_inference_ns,
    busy_server_other_ns,
    busy_model_unattributed_ns,
    provenance,
    inconsistent,
    input_tokens,
    output_tokens,
    cache_read_input_tokens,
    tokens_estimated,
    ttft_ns,
    itl_ns,
    decode_tokens_per_second,
    model_calls,
    span_count,
    computed_at,
    version
)
SELECT
    project,
    trace_id,
    start_time,
    e2e_ns,
    service,
    name,
    model,
    provider,
    status_error,
    retrieval_ns,
    tool_ns,
    app_other_ns,
    network_ns,
    queue_ns,
    prefill_ns,
    decode_ns,
    inference_ns,
    server_other_ns,
    model_unattributed_ns,
    busy_retrieval_ns,
    busy_tool_ns,
    busy_app_other_ns,
    busy_network_ns,
    busy_queue_ns,
    busy_prefill_ns,
    busy_decode_ns,
    busy_inference_ns,
    busy_server_other_ns,
    busy_model_unattributed_ns,
    provenance,
    inconsistent,
    input_tokens,
    output_tokens,
    cache_read_input_tokens,
    tokens_estimated,
    ttft_ns,
    itl_ns,
    decode_tokens_per_second,
    model_calls,
    span_count,
    computed_at,
    bitOr(
        bitShiftLeft(toUInt64(least(span_count, 4194303)), 42),
        toUInt64(greatest(toUnixTimestamp64Milli(computed_at) - 1577836800000, 0))
    )
FROM {database}.requests FINAL;

RENAME TABLE {database}.requests TO {database}.requests_before_0015,
    {database}.requests_0015 TO {database}.requests;

-- A materialized view does not follow its source through a RENAME: the rollup's view is created
-- again on the new table, and every hour is marked touched (its rollup is rebuilt from the rows).
DROP VIEW IF EXISTS {database}.requests_touched_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_touched_mv TO {database}.requests_touched AS
SELECT project, toStartOfHour(start_time) AS hour, max(now64(6, 'UTC')) AS last_insert
FROM {database}.requests
GROUP BY project, hour;

INSERT INTO {database}.requests_touched
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
