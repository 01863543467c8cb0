-- One row per span as received over OTLP. Ids are stored compactly (raw bytes).
-- A span sent twice (exporter retry) collapses to its latest copy: ReplacingMergeTree on span id.
CREATE TABLE IF NOT EXISTS {database}.spans
(
    project LowCardinality(String) DEFAULT 'default',
    trace_id FixedString(16),
    span_id FixedString(8),
    parent_span_id FixedString(8),  -- zero bytes when the span has no parent
    service LowCardinality(String),
    name String,
    span_kind LowCardinality(String),  -- OpenTelemetry span kind: internal, server, client, ...
    kind LowCardinality(String),  -- our classification: request, model, retrieval, tool, other
    start_time DateTime64(9, 'UTC'),
    duration_ns Int64,
    status_code UInt8,  -- 0 unset, 1 ok, 2 error
    status_message String,
    attributes Map(LowCardinality(String), String),
    resource_attributes Map(LowCardinality(String), String),
    inserted_at DateTime64(6) DEFAULT now64(6)
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toYYYYMMDD(start_time)
ORDER BY (project, trace_id, span_id);
