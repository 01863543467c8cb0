-- Two model-call components for providers that report prefill and decode only as their sum (TGI):
-- `inference` (prefill + decode, not split by the provider) and `server_other` (the provider's
-- server time outside its queue and inference: validation, tokenization). See attribution.py.
-- Rows stored before this migration read 0 for both: their time stays where it was attributed.

-- Columns first, codecs after: on a cluster a column change goes to both the local and the
-- Distributed table, a codec only to the local one (ddl.py), so they are separate statements.
ALTER TABLE {database}.requests
    ADD COLUMN IF NOT EXISTS inference_ns Int64 AFTER decode_ns,
    ADD COLUMN IF NOT EXISTS server_other_ns Int64 AFTER inference_ns,
    ADD COLUMN IF NOT EXISTS busy_inference_ns Int64 AFTER busy_decode_ns,
    ADD COLUMN IF NOT EXISTS busy_server_other_ns Int64 AFTER busy_inference_ns;

ALTER TABLE {database}.requests
    MODIFY COLUMN inference_ns Int64 CODEC(T64),
    MODIFY COLUMN server_other_ns Int64 CODEC(T64),
    MODIFY COLUMN busy_inference_ns Int64 CODEC(T64),
    MODIFY COLUMN busy_server_other_ns Int64 CODEC(T64);

ALTER TABLE {database}.requests_rollup
    ADD COLUMN IF NOT EXISTS q_inference AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64) AFTER q_decode,
    ADD COLUMN IF NOT EXISTS q_server_other AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64) AFTER q_inference,
    ADD COLUMN IF NOT EXISTS sum_inference Int64 AFTER sum_decode,
    ADD COLUMN IF NOT EXISTS sum_server_other Int64 AFTER sum_inference;

-- Builds made before this migration hold empty states for the new columns, which would leave
-- their requests out of the new components' percentiles: mark every hour touched, so it is read
-- from the request rows until the next refresh rebuilds it.
INSERT INTO {database}.requests_touched
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
