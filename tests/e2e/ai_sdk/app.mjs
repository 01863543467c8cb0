// One chat request of a TypeScript app on Vercel's AI SDK: a route span, then streamText with a
// tool (two provider calls: one asks for the tool, one answers), traced by the AI SDK's
// OpenTelemetry integration and exported over OTLP/HTTP to a LatencyLens collector.
//
// Environment: PROVIDER_URL (an OpenAI-compatible server), OTLP_URL (the collector's /v1/traces),
// TELEMETRY ("genai" for OpenTelemetry, "legacy" for LegacyOpenTelemetry), OTLP_ENCODING
// ("protobuf", or "json": the JavaScript SDK's JSON exporter). Prints the trace id.
import { trace, SpanKind } from '@opentelemetry/api';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createOpenAI } from '@ai-sdk/openai';
import { LegacyOpenTelemetry, OpenTelemetry } from '@ai-sdk/otel';
import { jsonSchema, registerTelemetry, stepCountIs, streamText, tool } from 'ai';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'ai-sdk-chat' }),
  spanProcessors: [
    new BatchSpanProcessor(
      process.env.OTLP_ENCODING === 'json'
        ? new JsonExporter({ url: process.env.OTLP_URL })
        : new ProtobufExporter({ url: process.env.OTLP_URL }),
    ),
  ],
});
provider.register();
registerTelemetry(process.env.TELEMETRY === 'legacy' ? new LegacyOpenTelemetry() : new OpenTelemetry());

const openai = createOpenAI({ baseURL: process.env.PROVIDER_URL + '/v1', apiKey: 'sk-test' });
const weather = tool({
  description: 'The weather in a city',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
  execute: async ({ city }) => {
    await new Promise((resolve) => setTimeout(resolve, 100));
    return { city, celsius: 21 };
  },
});

const tracer = trace.getTracer('ai-sdk-chat');
const traceId = await tracer.startActiveSpan('POST /api/chat', { kind: SpanKind.SERVER }, async (span) => {
  const result = streamText({
    model: openai.chat('gpt-4.1'),
    prompt: 'What is the weather in Paris?',
    tools: { weather },
    stopWhen: stepCountIs(2),
  });
  let text = '';
  for await (const delta of result.textStream) text += delta;
  if (text !== 'Sunny, 21 degrees.') throw new Error(`unexpected answer: ${text}`);
  span.end();
  return span.spanContext().traceId;
});
await provider.shutdown(); // exports what is left
console.log(traceId);
