-- One row per request (trace), recomputed whenever spans of the trace arrive; the latest
-- computation wins (ReplacingMergeTree on computed_at). Read with FINAL.
-- <component>_ns: critical-path attribution, sums to e2e_ns. busy_<component>_ns: exclusive time
-- summed over all spans (parallel work counted in full).
CREATE TABLE IF NOT EXISTS {database}.requests
(
    project LowCardinality(String) DEFAULT 'default',
    trace_id FixedString(16),
    start_time DateTime64(9, 'UTC'),
    e2e_ns Int64,
    service LowCardinality(String),
    name String,  -- root span name (route)
    model LowCardinality(String),
    provider LowCardinality(String),
    status_error UInt8,
    retrieval_ns Int64,
    tool_ns Int64,
    app_other_ns Int64,
    network_ns Int64,
    queue_ns Int64,
    prefill_ns Int64,
    decode_ns Int64,
    model_unattributed_ns Int64,
    busy_retrieval_ns Int64,
    busy_tool_ns Int64,
    busy_app_other_ns Int64,
    busy_network_ns Int64,
    busy_queue_ns Int64,
    busy_prefill_ns Int64,
    busy_decode_ns Int64,
    busy_model_unattributed_ns Int64,
    provenance Map(LowCardinality(String), LowCardinality(String)),
    inconsistent UInt8,
    input_tokens Int64,
    output_tokens Int64,
    cache_read_input_tokens Int64,
    ttft_ns Nullable(Int64),
    itl_ns Nullable(Int64),
    decode_tokens_per_second Nullable(Float64),
    model_calls UInt16,
    span_count UInt32,
    computed_at DateTime64(6)
)
ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (project, start_time, trace_id);
