-- Which traces had spans inserted, and when (the store's clock): what the reconciler recomputes
-- once a trace has been quiet for the settle delay (pipeline/reconciler.py). Filled by a view on
-- every insert into `spans`, whichever collector, spool replay or backfill made it, so a collector
-- that stopped between storing spans and writing the row leaves nothing behind. `last_insert` is
-- the spans' own stamp (`inserted_at`), so a trace's touch and its spans' versions agree.
-- Kept two days: the reconciler looks back at most an hour (LATENCYLENS_RECONCILE_LOOKBACK_S).
CREATE TABLE IF NOT EXISTS {database}.traces_touched
(
    minute DateTime('UTC'),
    project LowCardinality(String),
    trace_id FixedString(16),
    last_insert SimpleAggregateFunction(max, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (minute, project, trace_id)
TTL minute + toIntervalDay(2)
SETTINGS ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.traces_touched_mv TO {database}.traces_touched AS
SELECT toStartOfMinute(inserted_at, 'UTC') AS minute, project, trace_id,
       max(toDateTime64(inserted_at, 6, 'UTC')) AS last_insert
FROM {database}.spans
GROUP BY minute, project, trace_id;
