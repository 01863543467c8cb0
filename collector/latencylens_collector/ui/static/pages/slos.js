// SLOs: each objective's status and error budget, then the alert history with what drove it.
import { getJSON, getCapabilities, errorText } from "../api.js";
import { LABELS, metricLabel } from "../components.js";
import { h, mount } from "../dom.js";
import { dur, pct, when } from "../format.js";

function objectiveText(slo) {
  const o = slo.objective || {};
  if (o.type === "percentile") return `p${+(o.quantile * 100).toFixed(2)} ≤ ${dur(o.threshold_ns)} over ${o.window}${o.for ? `, for ${o.for}` : ""}`;
  if (o.type === "ratio") return `${pct(o.target, o.target >= 0.99 ? 1 : 0)} of requests ≤ ${dur(o.threshold_ns)} over ${o.period}`;
  return typeof o === "object" ? JSON.stringify(o) : String(o);
}

function filterText(filter) {
  if (!filter || typeof filter !== "object") return filter ? String(filter) : "all requests";
  const parts = Object.entries(filter).filter(([, v]) => v !== null && v !== "").map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(", ") : "all requests";
}

function budget(remaining) {
  if (remaining === null || remaining === undefined) return h("span", { class: "muted", text: "—" });
  const clamped = Math.max(0, Math.min(1, remaining));
  return h("div", { class: "budget", title: `${pct(remaining, 1)} of the error budget left` },
    h("span", { class: remaining <= 0 ? "out" : remaining < 0.25 ? "low" : "", style: { width: `${clamped * 100}%` } }),
    h("em", { text: remaining <= 0 ? "budget spent" : `${pct(remaining, 0)} left` }));
}

function burnRates(rates) {
  const entries = Object.entries(rates || {});
  return entries.length ? entries.map(([w, r]) => `${w}: ${Number(r).toFixed(1)}×`).join("  ") : "—";
}

// Cells carry their column's name (data-label): on a phone each row becomes a card of labelled lines.
function cell(label, attrs, ...children) {
  return h("td", { ...attrs, "data-label": label }, ...children);
}

function sloTable(slos) {
  const head = ["SLO", "Status", "Objective", "Metric · scope", "Error budget", "Burn rate", "Current", "Evaluated"];
  return h("div", { class: "scroll" }, h("table", { class: "grid stackable", id: "slos" },
    h("thead", {}, h("tr", {}, head.map((t) => h("th", { text: t })))),
    h("tbody", {}, slos.map((slo) => h("tr", { "data-slo-id": slo.id },
      cell("SLO", { class: "wrap", text: slo.name }),
      cell("Status", { "data-column": "status" }, h("span", { class: `badge ${String(slo.status).toLowerCase()}`, text: slo.status })),
      cell("Objective", { class: "wrap", text: objectiveText(slo) }),
      cell("Metric · scope", { class: "wrap", text: `${metricLabel(`${slo.metric}_ns`)} · ${filterText(slo.filter)}` }),
      cell("Error budget", {}, budget(slo.budget_remaining)),
      cell("Burn rate", { class: "mono wrap", text: burnRates(slo.burn_rates) }),
      cell("Current", { class: "num", text: dur(slo.value_ns) }),
      cell("Evaluated", { text: when(slo.evaluated_at) }))))));
}

function alertTable(alerts) {
  const head = ["State", "SLO", "Started", "Fired", "Resolved", "Value", "Burn rate", "Driven by", "Worst requests"];
  return h("div", { class: "scroll" }, h("table", { class: "grid stackable", id: "alerts" },
    h("thead", {}, h("tr", {}, head.map((t) => h("th", { text: t })))),
    h("tbody", {}, alerts.map((a) => h("tr", { "data-alert-id": a.id },
      cell("State", {}, h("span", { class: `badge ${String(a.state).toLowerCase()}`, text: a.state })),
      cell("SLO", { class: "wrap", text: a.slo_name || a.slo_id }),
      cell("Started", { text: when(a.started_at) }),
      cell("Fired", { text: when(a.fired_at) }),
      cell("Resolved", { text: when(a.resolved_at) }),
      cell("Value", { class: "num", text: dur(a.value_ns) }),
      cell("Burn rate", { class: "num", text: a.burn_rate === null || a.burn_rate === undefined ? "—" : `${Number(a.burn_rate).toFixed(1)}×` }),
      cell("Driven by", {}, a.dominant_component ? [h("span", { class: `chip c-${a.dominant_component}` }), `${LABELS[a.dominant_component] || a.dominant_component}${a.dominant_delta_ns ? ` +${dur(a.dominant_delta_ns)}` : ""}`] : "—"),
      cell("Worst requests", { class: "wrap" }, (a.worst_trace_ids || []).slice(0, 3).map((id) => h("a", { class: "mono", href: `/ui/requests/${id}`, title: id, text: `${id.slice(0, 12)}… ` }))))))));
}

export async function render(root) {
  const capabilities = await getCapabilities();
  if (!capabilities.slos) {
    mount(root, h("h1", { text: "SLOs" }),
      h("p", { class: "notice", id: "unavailable", text: "SLOs are not available: this service has no SLO endpoint (/api/slos)." }));
    root.dataset.state = "ready";
    return;
  }
  root.dataset.state = "loading";
  const [slos, alerts] = await Promise.all([
    getJSON("/api/slos"),
    capabilities.alerts ? getJSON("/api/alerts", { limit: 100 }) : Promise.resolve(null),
  ]);
  const list = slos.ok ? slos.data.slos || [] : [];
  mount(root,
    h("h1", { text: "SLOs" }),
    !slos.ok ? h("p", { class: "error", text: `Could not load SLOs (${errorText(slos)}).` })
      : list.length ? sloTable(list) : h("p", { class: "notice", text: "No SLOs are defined yet." }),
    h("h2", { text: "Alert history" }),
    alerts === null ? h("p", { class: "muted", text: "Alert history is not available on this service (/api/alerts)." })
      : !alerts.ok ? h("p", { class: "error", text: `Could not load alerts (${errorText(alerts)}).` })
        : (alerts.data.alerts || []).length ? alertTable(alerts.data.alerts) : h("p", { class: "muted", text: "No alerts have fired." }));
  root.dataset.state = "ready";
}
