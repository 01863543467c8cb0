// The components of a request's time, in display order, with their labels. Colours live in app.css
// (class c-<name>) so HTML bars, SVG charts and the Grafana dashboards share one palette.
export const COMPONENTS = [
  "retrieval", "tool", "app_other", "network", "queue", "prefill", "decode", "inference", "server_other",
  "model_unattributed",
];
export const MODEL_COMPONENTS = [
  "network", "queue", "prefill", "decode", "inference", "server_other", "model_unattributed",
];

export const LABELS = {
  retrieval: "retrieval",
  tool: "tool",
  app_other: "app",
  network: "network",
  queue: "queue",
  prefill: "prefill",
  decode: "decode",
  inference: "inference",
  server_other: "server, other",
  model_unattributed: "model, unattributed",
};

export const DESCRIPTIONS = {
  retrieval: "retrieval spans (vector search, database lookups)",
  tool: "tool calls",
  app_other: "the application's own code between and around calls",
  network: "client-measured model call time the provider did not report as server time",
  queue: "waiting in the provider's queue",
  prefill: "processing the prompt",
  decode: "generating output tokens",
  inference: "prefill + decode, not split by the provider",
  server_other: "provider server time outside queue and inference (validation, tokenization)",
  model_unattributed: "model call time the provider's numbers do not account for",
};

// The component a span's own (exclusive) time counts as; model spans split further.
export function spanComponent(kind) {
  if (kind === "retrieval" || kind === "tool") return kind;
  if (kind === "model") return "model";
  return "app_other";
}

export function dominant(parts) {
  let best = null;
  for (const name of COMPONENTS) {
    if ((parts[name] || 0) > 0 && (best === null || parts[name] > parts[best])) best = name;
  }
  return best;
}
