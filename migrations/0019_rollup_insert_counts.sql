-- A rollup's freshness that no clock can fool: every (project, hour) also counts the request rows
-- ever inserted into it (rows and tombstones), and each build records that count as it was when
-- the build started. A build is used only while the count is unchanged *and* no insert is stamped
-- after its `covers_until`; an insert stamped by a server whose clock is behind the builder's (or
-- after a clock stepped back) still changes the count. See storage/rollup.py.
ALTER TABLE {database}.requests_touched
    ADD COLUMN IF NOT EXISTS inserted_rows SimpleAggregateFunction(sum, UInt64) AFTER last_insert;

ALTER TABLE {database}.requests_rollup_builds
    ADD COLUMN IF NOT EXISTS inserted_rows UInt64 AFTER covers_until;

DROP VIEW IF EXISTS {database}.requests_touched_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_touched_mv TO {database}.requests_touched AS
SELECT project, toStartOfHour(start_time) AS hour, max(now64(6, 'UTC')) AS last_insert,
       count() AS inserted_rows
FROM {database}.requests
GROUP BY project, hour;

-- Rows inserted while the view was being replaced were not stamped, and builds made before this
-- migration recorded no count: every hour is marked touched, so its rollup is rebuilt.
INSERT INTO {database}.requests_touched (project, hour, last_insert)
SELECT project, toStartOfHour(start_time) AS hour, now64(6, 'UTC')
FROM {database}.requests
GROUP BY project, hour;
