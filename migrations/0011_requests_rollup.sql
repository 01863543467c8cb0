-- Hourly pre-aggregates of request rows for the aggregate queries (stats, compare): see
-- collector/latencylens_collector/rollup.py for how they are built and when they are trusted.

-- When rows were last inserted into each (project, hour) of `requests`, whatever wrote them
-- (writer, spool replay, a backfill). A rollup of an hour is used only while it is newer.
CREATE TABLE IF NOT EXISTS {database}.requests_touched
(
    project LowCardinality(String),
    hour DateTime('UTC'),
    last_insert SimpleAggregateFunction(max, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(hour)
ORDER BY (project, hour)
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_touched_mv TO {database}.requests_touched AS
SELECT project, toStartOfHour(start_time) AS hour, max(now64(6, 'UTC')) AS last_insert
FROM {database}.requests
GROUP BY project, hour;

-- One row per (project, kept dimensions, hour, their values, has_ttft, has_itl) of one build.
-- `kept` is a bit mask of the dimensions the row is grouped by (service 8, route 4, model 2,
-- provider 1); dimensions not kept hold ''. Percentiles are quantilesBFloat16 states, which merge
-- without loss: merged from here they equal the same percentiles computed over the rows.
CREATE TABLE IF NOT EXISTS {database}.requests_rollup
(
    project LowCardinality(String),
    kept UInt8,
    hour DateTime('UTC'),
    service LowCardinality(String),
    name String,
    model LowCardinality(String),
    provider LowCardinality(String),
    has_ttft UInt8,
    has_itl UInt8,
    build UInt64,
    requests UInt64,
    q_e2e AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_ttft AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Nullable(Int64)),
    q_itl AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Nullable(Int64)),
    q_retrieval AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_tool AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_app_other AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_network AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_queue AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_prefill AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_decode AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_model_unattributed AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    sum_e2e Int64,
    sum_retrieval Int64,
    sum_tool Int64,
    sum_app_other Int64,
    sum_network Int64,
    sum_queue Int64,
    sum_prefill Int64,
    sum_decode Int64,
    sum_model_unattributed Int64,
    tps_sum Float64,
    tps_count UInt64,
    input_tokens Int64,
    cached_tokens Int64
)
ENGINE = ReplacingMergeTree(build)
PARTITION BY toYYYYMMDD(hour)
ORDER BY (project, kept, hour, service, name, model, provider, has_ttft, has_itl)
-- Small granules: a query reads one grouping's rows, and every row read costs deserializing its
-- states (kilobytes each); with the default granularity a read decoded every grouping's states.
SETTINGS index_granularity = 16, ttl_only_drop_parts = 1;

-- The latest build of each (project, hour): its id (rows of older builds are ignored), the
-- moment up to which it is known to include every insert, and per grouping (`kept`) an estimate
-- of the values its states hold (sum over rows of least(requests, 512)), which tells a query
-- whether merging them is cheaper than reading the request rows.
CREATE TABLE IF NOT EXISTS {database}.requests_rollup_builds
(
    project LowCardinality(String),
    hour DateTime('UTC'),
    build UInt64,
    covers_until DateTime64(6, 'UTC'),
    requests UInt64,
    state_values Map(UInt8, UInt64)
)
ENGINE = ReplacingMergeTree(build)
PARTITION BY toYYYYMMDD(hour)
ORDER BY (project, hour)
SETTINGS ttl_only_drop_parts = 1;

-- Request rows stored before this migration count as inserted now: every hour gets rolled up.
INSERT INTO {database}.requests_touched
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
