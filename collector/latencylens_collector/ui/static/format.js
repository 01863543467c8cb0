// Number formatting shared by all pages. Durations arrive as integer nanoseconds.
export function dur(ns) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return "—";
  const abs = Math.abs(ns);
  if (abs >= 10e9) return `${(ns / 1e9).toFixed(1)} s`;
  if (abs >= 1e9) return `${(ns / 1e9).toFixed(2)} s`;
  if (abs >= 100e6) return `${Math.round(ns / 1e6)} ms`;
  if (abs >= 1e6) return `${(ns / 1e6).toFixed(1)} ms`;
  if (abs >= 1e3) return `${Math.round(ns / 1e3)} µs`;
  return `${ns} ns`;
}

export function pct(ratio, digits = 0) {
  if (ratio === null || ratio === undefined || Number.isNaN(ratio)) return "—";
  return `${(ratio * 100).toFixed(digits)}%`;
}

export function num(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

// A token count: "—" when unknown (null: not reported, never shown as 0), "~" before an estimate.
export function tokens(value, estimated = false) {
  if (value === null || value === undefined) return "—";
  return `${estimated ? "~" : ""}${num(value)}`;
}

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const today = new Date();
  const time = date.toLocaleTimeString("en-GB", { hour12: false });
  if (date.toDateString() === today.toDateString()) return time;
  return `${date.toLocaleDateString("en-CA")} ${time}`;
}
