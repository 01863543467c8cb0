-- A batch the collector replays from its spool carries the insert_deduplication_token of its first
-- attempt. Replicated tables honour it by default; a single server's MergeTree only within this
-- window of recent inserts. With it, a replayed batch is dropped at insert time instead of being
-- stored twice and collapsed later by ReplacingMergeTree.
ALTER TABLE {database}.spans MODIFY SETTING non_replicated_deduplication_window = 1000;
