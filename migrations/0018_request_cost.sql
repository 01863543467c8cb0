-- What each request cost, priced at ingest (analysis/costs.py): the sum over its model calls of
-- uncached input, cached input and output tokens at their model's price, in integer nano-dollars
-- (10⁻⁹ USD), so sums are exact and the same in any order (rollup or rows). NULL: some model call
-- has no price (a model or provider the price data does not know, a count not reported, or an
-- instrumentation's estimate), never 0. `price_version` names the prices used: the genai-prices
-- release, plus a digest of the configured prices when one of them priced a call. Rows stored
-- before this migration read NULL and '' (not priced); a recomputation (late spans) prices them.

-- Columns first, codecs after: on a cluster a column change goes to both the local and the
-- Distributed table, a codec only to the local one (ddl.py), so they are separate statements.
ALTER TABLE {database}.requests
    ADD COLUMN IF NOT EXISTS cost_nano_usd Nullable(Int64) AFTER decode_tokens_per_second,
    ADD COLUMN IF NOT EXISTS price_version LowCardinality(String) AFTER cost_nano_usd;

ALTER TABLE {database}.requests
    MODIFY COLUMN cost_nano_usd Nullable(Int64) CODEC(T64);

-- Per hour and grouping: the cost's percentile state, its sum and how many requests have one.
ALTER TABLE {database}.requests_rollup
    ADD COLUMN IF NOT EXISTS q_cost AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Nullable(Int64)) AFTER q_itl,
    ADD COLUMN IF NOT EXISTS sum_cost Int64 AFTER cached_tokens,
    ADD COLUMN IF NOT EXISTS priced UInt64 AFTER sum_cost;

-- Builds made before this migration hold empty cost states: every hour is marked touched, so it
-- is read from the request rows until the next refresh rebuilds it.
INSERT INTO {database}.requests_touched
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
