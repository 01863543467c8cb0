// Slow requests: filters (kept in the URL), a sortable table, each row a labelled stacked bar.
// The server filters, orders by duration and limits; the browser only sorts the page it received.
import { getJSON, getCapabilities, errorText } from "../api.js";
import { fitLabels, stackedBar, componentKey } from "../charts.js";
import { COMPONENTS, LABELS, dominant } from "../components.js";
import { h, mount } from "../dom.js";
import { dur, tokens, when } from "../format.js";

const WINDOWS = [["15m", 900], ["1h", 3600], ["6h", 21600], ["24h", 86400], ["7d", 604800], ["30d", 2592000]];
const LIMITS = ["50", "100", "250", "1000"];
const FILTERS = ["window", "service", "route", "model", "provider", "min_ms", "limit", "sort"];
const DEFAULTS = { window: "24h", limit: "100", sort: "-e2e" };

const ROOTLESS_HINT = "Its root span is a single step (or never arrived): an app without a request root makes every step its own request. Wrap the handler in @latencylens.request or let the web framework's instrumentation make the root (README, “Request roots”).";

// A row whose root span is one step: its root never arrived, or the root's own time is not the
// application's (a model call, retrieval or tool span at the top has no "app, other" time).
function rootless(row) {
  return Boolean(row.root_missing) || (row.e2e_ns > 0 && (row.parts.app_other || 0) === 0);
}

const COLUMNS = [
  { key: "start", label: "Started", value: (r) => r.start_time, cell: (r) => when(r.start_time) },
  { key: "route", label: "Request", value: (r) => r.name, cell: (r) => [h("a", { href: `/ui/requests/${r.trace_id}`, text: r.name || "(unnamed)" }),
    rootless(r) ? h("span", { class: "badge warning", "data-flag": "no-root", title: ROOTLESS_HINT, text: "no request root" }) : null] },
  { key: "service", label: "Service", value: (r) => r.service, cell: (r) => r.service },
  { key: "model", label: "Model · provider", value: (r) => `${r.model} ${r.provider}`, cell: (r) => [r.model || "—", h("span", { class: "muted", text: r.provider ? ` · ${r.provider}` : "" })] },
  { key: "e2e", label: "End-to-end", num: true, value: (r) => r.e2e_ns, cell: (r) => dur(r.e2e_ns) },
  { key: "ttft", label: "TTFT", num: true, value: (r) => r.ttft_ns ?? -1, cell: (r) => dur(r.ttft_ns) },
  { key: "tokens", label: "Tokens in → out", num: true, value: (r) => r.output_tokens ?? -1, cell: (r) => h("span", { title: r.tokens_estimated ? "estimated by the instrumentation, not reported by the provider" : "", text: `${tokens(r.input_tokens, r.tokens_estimated)} → ${tokens(r.output_tokens, r.tokens_estimated)}` }) },
];

function readFilters() {
  const params = new URLSearchParams(window.location.search);
  const filters = {};
  for (const key of FILTERS) filters[key] = params.get(key) ?? DEFAULTS[key] ?? "";
  return filters;
}

function writeFilters(filters) {
  const params = new URLSearchParams();
  for (const key of FILTERS) {
    if (filters[key] && filters[key] !== DEFAULTS[key]) params.set(key, filters[key]);
  }
  const query = params.toString();
  window.history.pushState(null, "", `${window.location.pathname}${query ? `?${query}` : ""}`);
}

function apiParams(filters, cursor, accepted) {
  const seconds = (WINDOWS.find(([name]) => name === filters.window) || WINDOWS[3])[1];
  const now = Date.now() / 1000;
  const params = {
    since: (now - seconds).toFixed(3),
    until: (now + 1).toFixed(3),
    service: filters.service,
    route: filters.route,
    model: filters.model,
    provider: filters.provider,
    min_duration_ms: filters.min_ms,
    limit: filters.limit,
    cursor,
  };
  return Object.fromEntries(Object.entries(params).filter(([key]) => accepted.has(key) || key === "since" || key === "until"));
}

function sortRows(rows, sort) {
  const descending = sort.startsWith("-");
  const column = COLUMNS.find((c) => c.key === sort.replace(/^-/, "")) || COLUMNS[4];
  return [...rows].sort((a, b) => {
    const va = column.value(a), vb = column.value(b);
    const order = va < vb ? -1 : va > vb ? 1 : 0;
    return descending ? -order : order;
  });
}

// Filter inputs and the API parameter each needs; one the server does not accept is not offered.
const FILTER_PARAMS = { service: "service", route: "route", model: "model", provider: "provider", min_ms: "min_duration_ms" };

function filterForm(filters, seen, accepted, onSubmit) {
  const input = (name, label, attrs = {}) => !accepted.has(FILTER_PARAMS[name]) ? null : h("label", {}, label,
    h("input", { name, value: filters[name], list: seen[name] ? `seen-${name}` : undefined, autocomplete: "off", ...attrs }),
    seen[name] ? h("datalist", { id: `seen-${name}` }, [...seen[name]].sort().map((v) => h("option", { value: v }))) : null);
  const select = (name, label, options) => h("label", {}, label,
    h("select", { name }, options.map(([value, text]) => h("option", { value, selected: value === filters[name], text }))));
  const form = h("form", { class: "filters card", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    onSubmit({ ...filters, ...Object.fromEntries([...data.entries()].map(([k, v]) => [k, String(v).trim()])) });
  } },
  select("window", "Started in the last", WINDOWS.map(([name]) => [name, name])),
  input("service", "Service", { placeholder: "any" }),
  input("route", "Route", { placeholder: "any" }),
  input("model", "Model", { placeholder: "any" }),
  input("provider", "Provider", { placeholder: "any" }),
  input("min_ms", "Slower than (ms)", { type: "number", min: "0", step: "any", placeholder: "0" }),
  select("limit", "Show at most", LIMITS.map((n) => [n, n])),
  h("button", { type: "submit", text: "Apply" }),
  h("button", { type: "button", class: "secondary", text: "Reset", onclick: () => onSubmit({ ...DEFAULTS }) }));
  return form;
}

// On a phone the filters fold away (open when one is set), so the list starts on the first screen.
function folding(form, filters) {
  if (!window.matchMedia("(max-width: 700px)").matches) return form;
  const active = FILTERS.some((key) => filters[key] && filters[key] !== (DEFAULTS[key] ?? ""));
  return h("details", { class: "filters-fold", open: active }, h("summary", { text: active ? "Filters (some set)" : "Filters" }), form);
}

function table(rows, filters, onSort) {
  const maxE2e = Math.max(1, ...rows.map((r) => r.e2e_ns));
  const [sortKey, descending] = [filters.sort.replace(/^-/, ""), filters.sort.startsWith("-")];
  const head = h("tr", {}, COLUMNS.map((column) => h("th", {
    class: column.num ? "num" : "",
    "aria-sort": column.key === sortKey ? (descending ? "descending" : "ascending") : undefined,
  }, h("button", { class: "sort", type: "button", "data-sort": column.key, text: column.label, onclick: () => {
    const next = column.key === sortKey && descending ? column.key : `-${column.key}`;
    onSort(next);
  } }))), h("th", { text: "Where the time went (critical path; bar length ∝ end-to-end)" }));
  const body = rows.map((row) => {
    const main = dominant(row.parts);
    return h("tr", {
      class: "clickable", "data-trace-id": row.trace_id,
      onclick: (event) => { if (!event.target.closest("a")) window.location.href = `/ui/requests/${row.trace_id}`; },
    },
    COLUMNS.map((column) => h("td", { class: column.num ? "num" : "", "data-label": column.label }, column.cell(row))),
    h("td", { class: "bar-cell", "data-label": "Where the time went", title: main ? `mostly ${LABELS[main]}` : "" },
      stackedBar(row.parts, { total: row.e2e_ns, scale: row.e2e_ns / maxE2e })));
  });
  return h("div", { class: "scroll" }, h("table", { class: "grid stackable sortable", id: "requests" }, h("thead", {}, head), h("tbody", {}, body)));
}

export async function render(root) {
  const capabilities = await getCapabilities();
  const accepted = new Set(capabilities.request_params || ["service", "model", "min_duration_ms", "limit"]);
  let filters = readFilters();
  const seen = { service: new Set(), model: new Set(), route: new Set(), provider: new Set() };
  let rows = [];
  let nextCursor = null;

  const draw = (status) => {
    const present = new Set(rows.flatMap((r) => COMPONENTS.filter((c) => r.parts[c] > 0)));
    mount(root,
      h("h1", { text: "Slow requests" }),
      folding(filterForm(filters, seen, accepted, (next) => { filters = next; writeFilters(filters); load(); }), filters),
      status,
      rows.length ? componentKey(present) : null,
      rows.length ? table(sortRows(rows, filters.sort), filters, (sort) => { filters = { ...filters, sort }; writeFilters(filters); draw(status); }) : null,
      nextCursor ? h("p", {}, h("button", { type: "button", class: "secondary", id: "more", text: "Load more", onclick: () => load(nextCursor) })) : null);
    fitLabels(root);
    root.dataset.state = "ready";
  };

  const load = async (cursor) => {
    root.dataset.state = "loading";
    const answer = await getJSON("/api/requests", apiParams(filters, cursor, accepted));
    if (!answer.ok) {
      rows = [];
      nextCursor = null;
      draw(h("p", { class: "error", text: `Could not load requests (${errorText(answer)}).` }));
      return;
    }
    const page = answer.data.requests || [];
    rows = cursor ? rows.concat(page) : page;
    nextCursor = answer.data.next_cursor || null;
    for (const row of rows) {
      seen.service.add(row.service);
      if (row.model) seen.model.add(row.model);
      if (row.name) seen.route.add(row.name);
      if (row.provider) seen.provider.add(row.provider);
    }
    let status = rows.length
      ? h("p", { class: "muted", id: "status", text: `${rows.length} slowest requests started in the last ${filters.window}${nextCursor ? " (more available)" : ""}. Click a row for its waterfall.` })
      : h("p", { class: "notice", id: "status", text: `No requests match these filters in the last ${filters.window}.` });
    const flagged = rows.filter(rootless).length;
    if (flagged && flagged * 2 >= rows.length) {
      status = [status, h("p", { class: "notice", id: "root-hint", text: `${flagged} of these ${rows.length} requests have no request root: each is a single step. ${ROOTLESS_HINT}` })];
    }
    draw(status);
  };

  window.addEventListener("popstate", () => { filters = readFilters(); load(); });
  await load();
}
