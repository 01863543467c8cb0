-- A build's rows never replace another build's. `requests_rollup` was ReplacingMergeTree(build)
-- sorted without the build: a merge kept only each group's highest build, so the rows of a build
-- whose record was never written (its process died between the two inserts), or of a rebuild
-- whose record was not written yet, replaced the rows of the build its record names, and queries
-- then read that hour from neither the rollup nor the request rows. Now the build is part of the
-- sorting key, after the hour (a read of one build skips the others' granules), and only a
-- repeated insert of the same build collapses. The refresh deletes the rows of superseded builds
-- (storage/rollup.py, drop_superseded).
--
-- ClickHouse cannot change a sorting key in place, and the rollup is derived data: every hour is
-- first marked touched (so no query trusts a build from here on and the next refreshes rebuild
-- every hour, newest first), then the table is recreated empty.
INSERT INTO {database}.requests_touched (project, hour, last_insert)
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;

DROP TABLE IF EXISTS {database}.requests_rollup;

-- The columns of migrations 0011, 0014 and 0018, in their order.
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
    q_cost AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Nullable(Int64)),
    q_retrieval AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_tool AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_app_other AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_network AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_queue AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_prefill AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_decode AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_inference AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_server_other AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    q_model_unattributed AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64),
    sum_e2e Int64,
    sum_retrieval Int64,
    sum_tool Int64,
    sum_app_other Int64,
    sum_network Int64,
    sum_queue Int64,
    sum_prefill Int64,
    sum_decode Int64,
    sum_inference Int64,
    sum_server_other Int64,
    sum_model_unattributed Int64,
    tps_sum Float64,
    tps_count UInt64,
    input_tokens Int64,
    cached_tokens Int64,
    sum_cost Int64,
    priced UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(hour)
ORDER BY (project, kept, hour, build, service, name, model, provider, has_ttft, has_itl)
-- Small granules, as before: a query reads one grouping's rows of one build, and every row read
-- costs deserializing its states (kilobytes each).
SETTINGS index_granularity = 16, ttl_only_drop_parts = 1;
