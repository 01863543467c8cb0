-- Span events (OTLP Span.events): name, time (ns) and attributes, content attributes dropped at
-- ingest like the span's own (docs/conventions.md, "Content"). A stream recorded by another
-- instrumentation carries its chunk times here (OpenLLMetry's `gen_ai.content.completion.chunk`,
-- OpenInference's "First Token Stream Event"). At most 128 events per span are kept: the first
-- 127 and the last (docs/collector.md). `dropped_events_count` is the sender's own count of events
-- it dropped (OpenTelemetry SDKs keep the latest 128 events, so the first ones are then gone).
-- Both are columns of `spans`, so they expire with it (same TTL); parts written before this
-- migration read as no events.
ALTER TABLE {database}.spans
    ADD COLUMN IF NOT EXISTS events
        Array(Tuple(name String, time DateTime64(9, 'UTC'), attributes Map(LowCardinality(String), String)))
        AFTER resource_attributes,
    ADD COLUMN IF NOT EXISTS dropped_events_count UInt32 DEFAULT 0 AFTER events;
