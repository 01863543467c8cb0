// The components of a request's time, in display order, with their labels and meanings, as the
// service defines them once (analysis/vocabulary.py, served as /ui/vocabulary.js). Colours live in
// app.css (class c-<name>) so HTML bars, SVG charts and the Grafana dashboards share one palette.
import { VOCABULARY } from "/ui/vocabulary.js";

export const COMPONENTS = VOCABULARY.parts.map((part) => part.key);
export const MODEL_COMPONENTS = [
  "network", "queue", "prefill", "decode", "inference", "server_other", "model_unattributed",
];
export const LABELS = Object.fromEntries(VOCABULARY.parts.map((part) => [part.key, part.label]));
export const DESCRIPTIONS = Object.fromEntries(VOCABULARY.parts.map((part) => [part.key, part.meaning]));
export const METRICS = VOCABULARY.metrics;
export const PERCENTILES = VOCABULARY.percentiles;

// A metric's label ("decode rate") and its meaning, for a heading and its tooltip.
export function metricLabel(key) {
  return METRICS[key] ? METRICS[key].label : key;
}

export function metricMeaning(key) {
  return METRICS[key] ? `${METRICS[key].label}: ${METRICS[key].meaning}` : "";
}

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
