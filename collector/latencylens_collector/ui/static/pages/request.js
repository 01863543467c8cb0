// One request: the explanation, its breakdown with provenance, its key numbers, and a waterfall
// of its spans on a time axis, coloured by component.
import { getJSON, errorText } from "../api.js";
import { fitLabels, stackedBar } from "../charts.js";
import { COMPONENTS, DESCRIPTIONS, LABELS, MODEL_COMPONENTS, dominant, metricLabel, metricMeaning, spanComponent } from "../components.js";
import { h, mount } from "../dom.js";
import { attributeValue, dur, num, pct, tokens, when } from "../format.js";

const PROVENANCE_HELP = {
  reported: "reported by the provider in its response",
  measured: "measured by the instrumented client",
  derived: "computed from reported and measured numbers",
  estimated: "estimated",
};

function prov(source) {
  if (!source) return null;
  return h("span", { class: `prov ${source}`, title: PROVENANCE_HELP[source] || source, text: source });
}

// Marks the collector gives a span when it reads the trace (latencylens.semconv): a span of a call
// another span counts, and a model span around several calls (application work around them).
const SAME_CALL_AS = "latencylens.same_call_as";
const WRAPS_MODEL_CALLS = "latencylens.wraps_model_calls";
const TTFT_PROVENANCE = "latencylens.provenance.ttft";
const FIRST_CONTENT = "latencylens.stream.first_content_ns";
// A model call's parts in the order they happen: what comes before the first token (network,
// queue, prefill, and the wait a provider without server timing does not split) before what comes
// after it (decode, or the unsplit inference); the server's other time last.
const CALL_ORDER = ["network", "queue", "prefill", "model_unattributed", "inference", "decode", "server_other"];
// Where the README explains request roots (the hint for a request that has none).
const ROOT_HINT = "README, “Request roots”: wrap the handler in @latencylens.request (or let a web framework's instrumentation make the root span)";

function flatten(spans, depth = 0, out = []) {
  for (const span of spans) {
    out.push({ span, depth });
    flatten(span.children || [], depth + 1, out);
  }
  return out;
}

function explanation(detail) {
  if (detail.explanation && detail.explanation.sentence) return detail.explanation.sentence;
  const main = dominant(detail.parts);
  if (!main) return "No time could be attributed to a component.";
  const share = detail.parts[main] / detail.e2e_ns;
  return `${LABELS[main][0].toUpperCase()}${LABELS[main].slice(1)} took ${dur(detail.parts[main])} of the ${dur(detail.e2e_ns)} end-to-end (${pct(share)}): ${DESCRIPTIONS[main]}.`;
}

function fact(label, value, source, id, { title, sub } = {}) {
  return h("div", { class: "fact", "data-fact": id, title },
    h("div", { class: "label" }, label, " ", prov(source)), h("div", { class: "value", text: value }),
    sub ? h("div", { class: "sub", text: sub }) : null);
}

// A metric's fact, named and explained as everywhere else (analysis/vocabulary.py).
function metricFact(key, value, source, id, sub) {
  return fact(metricLabel(key), value, source, id, { title: metricMeaning(key), sub });
}

// A request whose root is one step (a model call, retrieval or tool span) or whose root never
// arrived: usually an app without a request root, where every step becomes its own "request".
export function rootHint(detailOrRow, rootKind) {
  if (detailOrRow.root_missing) return "The root span of this trace never arrived: the request is rooted at its top-most span.";
  if (["model", "retrieval", "tool"].includes(rootKind)) return `This request is a single ${rootKind} step with no request root around it: each step of the app is then its own "request".`;
  return null;
}

// A span the request counts as a model call (not one merged into another, nor a wrapper).
function countedModel(span) {
  return span.kind === "model" && !span.attributes[SAME_CALL_AS] && !span.attributes[WRAPS_MODEL_CALLS];
}

function primaryModelSpan(rows) {
  const models = rows.map((r) => r.span).filter(countedModel);
  return models.sort((a, b) => (b.critical_ns - a.critical_ns) || (b.duration_ns - a.duration_ns))[0] || null;
}

function breakdownTable(detail) {
  const rows = COMPONENTS.filter((name) => detail.parts[name] > 0 || (detail.busy && detail.busy[name] > 0));
  const head = ["Component", "Critical path", "Share", "Busy (all spans)", "Source"];
  return h("div", { class: "scroll" }, h("table", { class: "grid stackable", id: "breakdown" },
    h("thead", {}, h("tr", {}, head.map((t, i) => h("th", { class: i && i < 4 ? "num" : "", text: t })))),
    h("tbody", {}, rows.map((name) => h("tr", { "data-component": name },
      h("td", { title: DESCRIPTIONS[name], "data-label": head[0] }, h("span", { class: `chip c-${name}` }), LABELS[name]),
      h("td", { class: "num", "data-label": head[1], text: dur(detail.parts[name]) }),
      h("td", { class: "num", "data-label": head[2], text: pct(detail.parts[name] / detail.e2e_ns, 1) }),
      h("td", { class: "num", "data-label": head[3], text: detail.busy ? dur(detail.busy[name]) : "—" }),
      h("td", { "data-label": head[4] }, prov(detail.provenance[name])))))));
}

function ticks(total, count = 6) {
  const target = total / count;
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(target, 1)));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((v) => v >= target) || 10 * magnitude;
  const out = [];
  // Stop before the right edge so the last label is not cut off.
  for (let t = 0; t <= total * 0.94; t += step) out.push(t);
  return out;
}

function modelSegments(detail) {
  // With one model call the request's model components are that call's split; with several they
  // are a sum over calls, so the bars stay one colour and the breakdown above has the split.
  if (detail.model_calls !== 1) return null;
  const total = MODEL_COMPONENTS.reduce((acc, name) => acc + (detail.parts[name] || 0), 0);
  if (!total) return null;
  return CALL_ORDER.filter((name) => detail.parts[name] > 0).map((name) => [name, detail.parts[name] / total]);
}

// Network is the client's time outside the provider's: part of it before the request reached the
// server, part after the last token left it. With a first-token time, the part drawn first is what
// the wait for that token leaves after queue and prefill (the rest goes last); without one, all of
// it is drawn first.
function placeNetwork(segments, span) {
  const network = segments.find(([name]) => name === "network");
  const first = Number(span.attributes[FIRST_CONTENT]);
  if (!network || span.attributes[FIRST_CONTENT] === undefined || !(span.duration_ns > 0) || !(first >= 0)) return segments;
  const server = segments.filter(([name]) => name === "queue" || name === "prefill").reduce((acc, [, share]) => acc + share, 0);
  const before = Math.min(Math.max(first / span.duration_ns - server, 0), network[1]);
  const rest = segments.filter(([name]) => name !== "network");
  return [...(before > 0 ? [["network", before]] : []), ...rest, ...(network[1] - before > 0 ? [["network", network[1] - before]] : [])];
}

// The key to a model call's colours in the waterfall: each part's name and what it means.
function waterfallKey(segments) {
  if (!segments) return null;
  return h("div", { class: "key", id: "waterfall-key" }, segments.map(([name]) => h("span", { "data-component": name },
    h("span", { class: `chip c-${name}` }), `${LABELS[name]} — ${DESCRIPTIONS[name]}`)));
}

// How a span's call was counted, as a short note beside its name (null for most spans).
function callNote(span, names) {
  const owner = span.attributes[SAME_CALL_AS];
  if (owner) {
    return h("span", { class: "note", "data-note": "same-call", title: "Another span describes the same model call and counts it; this one owns no time." },
      "same call as ", names.get(owner) || owner);
  }
  const wrapped = span.attributes[WRAPS_MODEL_CALLS];
  if (wrapped) {
    return h("span", { class: "note", "data-note": "wrapper", title: "A model span around several model calls: its own time is application work, each call inside counts on its own." },
      `around ${wrapped} model calls`);
  }
  return null;
}

function waterfall(detail) {
  const rows = flatten(detail.spans);
  const names = new Map(rows.map((r) => [r.span.span_id, r.span.name]));
  const t0 = Math.min(...rows.map((r) => r.span.start_ns));
  const end = Math.max(...rows.map((r) => r.span.start_ns + r.span.duration_ns));
  const total = Math.max(end - t0, 1);
  const segments = modelSegments(detail);
  // A phone's track is ~300 px: three ticks keep their labels apart.
  const narrow = window.matchMedia("(max-width: 700px)").matches;
  const axis = h("div", { class: "wf-row axis" }, h("div", { class: "wf-name", text: "span" }),
    h("div", { class: "wf-track" }, ticks(total, narrow ? 3 : 6).map((t) => h("span", { class: "wf-tick", style: { left: `${(t / total) * 100}%` }, text: dur(t) }))),
    h("div", { class: "wf-dur", text: "duration" }));
  const body = [];
  for (const { span, depth } of rows) {
    const sameCall = Boolean(span.attributes[SAME_CALL_AS]);
    const component = span.attributes[WRAPS_MODEL_CALLS] ? "app_other" : spanComponent(span.kind);
    const bar = h("div", {
      class: `wf-bar${span.critical_ns > 0 ? " critical" : ""}${sameCall ? " same-call" : ""}`,
      "data-component": sameCall ? "same_call" : component,
      style: { left: `${((span.start_ns - t0) / total) * 100}%`, width: `${(span.duration_ns / total) * 100}%` },
      title: `${span.name}: ${dur(span.duration_ns)}, own time ${dur(span.self_ns)}, on the critical path ${dur(span.critical_ns)}`,
    });
    // Label segments directly where they are wide enough (as a share of the whole track).
    const width = span.duration_ns / total;
    const room = narrow ? 0.3 : 0.09;
    const label = (name, share) => (share * width >= room ? LABELS[name] : "");
    if (sameCall) {
      bar.append(h("span", { class: "c-same_call", style: { width: "100%" }, text: width >= room ? "same call" : "" }));
    } else if (component === "model" && segments) {
      for (const [name, share] of placeNetwork(segments, span)) bar.append(h("span", { class: `c-${name}`, "data-component": name, title: `${LABELS[name]} ${pct(share)} of the call`, style: { width: `${share * 100}%` }, text: label(name, share) }));
    } else {
      bar.append(h("span", { class: `c-${component}`, style: { width: "100%" }, text: component === "model" ? (width >= room ? "model call" : "") : label(component, 1) }));
    }
    // The first token of a streamed call, where it came (a mark on the track, over the bar).
    const first = Number(span.attributes[FIRST_CONTENT]);
    const marker = component === "model" && !sameCall && span.attributes[FIRST_CONTENT] !== undefined && first >= 0 && first <= span.duration_ns
      ? h("i", { class: "wf-first", "data-marker": "first-token", "data-offset": (first / span.duration_ns).toFixed(6), title: `first token after ${dur(first)} (TTFT)`, style: { left: `${((span.start_ns - t0 + first) / total) * 100}%` } })
      : null;
    const attrs = h("div", { class: "wf-attrs", hidden: true },
      h("table", {}, h("tbody", {},
        [["span id", span.span_id], ["service", span.service], ["span kind", span.span_kind], ["status", span.status + (span.status_message ? `: ${span.status_message}` : "")],
          ["own time", dur(span.self_ns)], ["critical path", `${dur(span.critical_ns)}${span.critical_share !== undefined ? ` (${pct(span.critical_share)})` : ""}`],
          ...Object.entries(span.attributes).sort(([a], [b]) => a.localeCompare(b))]
          .map(([k, v]) => {
            const shown = attributeValue(k, v);
            const meaning = metricMeaning(k);
            return h("tr", { "data-attribute": k }, h("td", { text: k, title: meaning || undefined }),
              h("td", { class: "mono", title: shown.raw || undefined, "data-raw": shown.raw || undefined },
                shown.text, shown.raw ? h("span", { class: "raw", text: ` (${shown.raw})` }) : null,
                meaning ? h("span", { class: "raw", text: ` — ${meaning}` }) : null));
          }))));
    const row = h("div", { class: "wf-row", "data-span-id": span.span_id, "data-kind": span.kind, role: "button", tabindex: "0",
      onclick: () => { attrs.hidden = !attrs.hidden; }, onkeydown: (e) => { if (e.key === "Enter") attrs.hidden = !attrs.hidden; } },
    h("div", { class: "wf-name", style: { paddingLeft: `${8 + depth * 16}px` }, title: span.name },
      span.name, h("span", { class: "kind", text: span.kind }), callNote(span, names), span.status === "error" ? h("span", { class: "badge error", text: "error" }) : null),
    h("div", { class: "wf-track" }, bar, marker),
    h("div", { class: "wf-dur", text: dur(span.duration_ns) }));
    body.push(row, attrs);
  }
  return h("div", { class: "waterfall", id: "waterfall" }, axis, body);
}

export async function render(root, traceId) {
  root.dataset.state = "loading";
  const answer = await getJSON(`/api/requests/${traceId.toLowerCase()}`);
  if (!answer.ok) {
    const text = answer.status === 404 ? `No request with trace id ${traceId} (yet: spans may still be arriving).` : `Could not load the request (${errorText(answer)}).`;
    mount(root, h("p", {}, h("a", { href: "/ui/requests", text: "← slow requests" })), h("p", { class: answer.status === 404 ? "notice" : "error", text }));
    root.dataset.state = "ready";
    return;
  }
  const detail = answer.data;
  const rows = flatten(detail.spans);
  const model = primaryModelSpan(rows);
  const attrs = model ? model.attributes : {};
  const tokensSource = detail.tokens_estimated ? "estimated" : "reported";
  const tokenFact = (label, value, id) => fact(label, tokens(value, detail.tokens_estimated), value === null || !detail.model_calls ? null : tokensSource, id);
  document.title = `${detail.name} · LatencyLens`;
  const hint = rootHint(detail, detail.spans.length ? detail.spans[0].kind : null);
  mount(root,
    h("p", {}, h("a", { href: "/ui/requests", text: "← slow requests" }), " · ", h("a", { id: "advice-link", href: `/ui/advice?${new URLSearchParams({ route: detail.name, model: detail.model || "" })}`, text: "What to change first for this route" })),
    h("h1", {}, detail.name || "(unnamed request)", " ", detail.status_error ? h("span", { class: "badge error", text: "error" }) : null),
    h("p", { class: "muted" }, `${detail.service} · ${detail.model || "no model"}${detail.provider ? ` · ${detail.provider}` : ""} · started ${when(detail.start_time)} · `, h("span", { class: "mono", text: detail.trace_id })),
    hint ? h("p", { class: "notice", id: "root-hint" }, h("strong", { text: "No request root. " }), hint,
      ` Instrument the request itself so its steps nest under one root (${ROOT_HINT}).`) : null,
    h("div", { class: "card" },
      h("p", { class: "explanation", id: "explanation", text: explanation(detail) }),
      stackedBar(detail.parts, { total: detail.e2e_ns, tall: true }),
      detail.inconsistent ? h("p", { class: "notice", text: "A provider's timing for a call did not add up: more server time than the client measured (its parts were clipped to fit), or a total smaller than its own parts (their sum was used)." }) : null),
    h("div", { class: "facts", id: "facts" },
      metricFact("e2e_ns", dur(detail.e2e_ns), "measured", "e2e"),
      metricFact("ttft_ns", dur(detail.ttft_ns), detail.ttft_ns === null ? null : detail.provenance.ttft || attrs[TTFT_PROVENANCE] || "measured", "ttft"),
      metricFact("itl_ns", dur(detail.itl_ns), detail.itl_ns === null ? null : attrs["latencylens.provenance.itl"] || "derived", "itl"),
      metricFact("decode_tokens_per_second", detail.decode_tokens_per_second === null ? "—" : `${num(detail.decode_tokens_per_second)} tok/s`, detail.decode_tokens_per_second === null ? null : "derived", "tps",
        detail.decode_tokens_per_second === null ? null : "output tokens / decode time"),
      tokenFact("Input tokens", detail.input_tokens, "input_tokens"),
      tokenFact("Output tokens", detail.output_tokens, "output_tokens"),
      tokenFact("Cached input tokens", detail.cache_read_input_tokens, "cached_tokens"),
      fact("Cost", detail.cost_usd === null || detail.cost_usd === undefined ? "no price" : `$${Number(detail.cost_usd).toPrecision(3)}`, detail.cost_usd === null || detail.cost_usd === undefined ? null : "derived", "cost"),
      fact("Model calls · spans", `${detail.model_calls} · ${detail.span_count}`, null, "counts")),
    h("h2", { text: "Where the time went" }),
    breakdownTable(detail),
    h("h2", { text: "Spans" }),
    h("p", { class: "muted", id: "spans-help", text: "Bars on the request's time axis, coloured by component; outlined bars are on the critical path. Model calls are split into their parts (network, queue, prefill and decode, or the inference of a provider that does not split them) in proportion" + (detail.model_calls === 1 ? "." : " only when the request made one call.") + " A thin dark line on a model call marks its first token (TTFT)." + " Click a span for its attributes." + (rows.some(({ span }) => span.attributes[SAME_CALL_AS]) ? " Grey hatched bars are spans of a model call another span counts: they own no time." : "") }),
    waterfallKey(modelSegments(detail)),
    waterfall(detail));
  fitLabels(root);
  root.dataset.state = "ready";
}
