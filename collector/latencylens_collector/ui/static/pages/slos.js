// SLOs: each objective's status and error budget, then the alert history with what drove it.
import { getJSON, getCapabilities, errorText } from "../api.js";
import { LABELS } from "../components.js";
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

function sloTable(slos) {
  return h("table", { class: "grid", id: "slos" },
    h("thead", {}, h("tr", {}, ["SLO", "Metric · scope", "Objective", "Status", "Error budget", "Burn rate", "Current", "Evaluated"].map((t) => h("th", { text: t })))),
    h("tbody", {}, slos.map((slo) => h("tr", { "data-slo-id": slo.id },
      h("td", { text: slo.name }),
      h("td", { text: `${slo.metric} · ${filterText(slo.filter)}` }),
      h("td", { text: objectiveText(slo) }),
      h("td", {}, h("span", { class: `badge ${String(slo.status).toLowerCase()}`, text: slo.status })),
      h("td", {}, budget(slo.budget_remaining)),
      h("td", { class: "mono wrap", text: burnRates(slo.burn_rates) }),
      h("td", { class: "num", text: dur(slo.value_ns) }),
      h("td", { text: when(slo.evaluated_at) })))));
}

function alertTable(alerts) {
  return h("table", { class: "grid", id: "alerts" },
    h("thead", {}, h("tr", {}, ["State", "SLO", "Started", "Fired", "Resolved", "Value", "Burn rate", "Driven by", "Worst requests"].map((t) => h("th", { text: t })))),
    h("tbody", {}, alerts.map((a) => h("tr", { "data-alert-id": a.id },
      h("td", {}, h("span", { class: `badge ${String(a.state).toLowerCase()}`, text: a.state })),
      h("td", { text: a.slo_name || a.slo_id }),
      h("td", { text: when(a.started_at) }),
      h("td", { text: when(a.fired_at) }),
      h("td", { text: when(a.resolved_at) }),
      h("td", { class: "num", text: dur(a.value_ns) }),
      h("td", { class: "num", text: a.burn_rate === null || a.burn_rate === undefined ? "—" : `${Number(a.burn_rate).toFixed(1)}×` }),
      h("td", {}, a.dominant_component ? [h("span", { class: `chip c-${a.dominant_component}` }), `${LABELS[a.dominant_component] || a.dominant_component}${a.dominant_delta_ns ? ` +${dur(a.dominant_delta_ns)}` : ""}`] : "—"),
      h("td", {}, (a.worst_trace_ids || []).slice(0, 3).map((id) => h("a", { class: "mono", href: `/ui/requests/${id}`, text: `${id.slice(0, 8)}… ` })))))));
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
