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

// Times are shown in UTC with the zone written out, as the CLI prints them: "2026-05-01 12:00:00
// UTC", or "12:00:00 UTC" for today (UTC). `short` drops the seconds (chart axes).
export function when(iso, { short = false } = {}) {
  if (iso === null || iso === undefined || iso === "") return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const text = date.toISOString();
  const day = text.slice(0, 10);
  const time = text.slice(11, short ? 16 : 19);
  return day === new Date().toISOString().slice(0, 10) ? `${time} UTC` : `${day} ${time} UTC`;
}

// A span attribute for people: an integer-ns duration ("…_ns") becomes "12.3 ms" with its raw
// value kept beside it; anything else is shown as it is.
export function attributeValue(key, value) {
  const text = String(value);
  if (/(_ns|\.ns)$/.test(key) && /^-?\d+$/.test(text)) return { text: dur(Number(text)), raw: `${text} ns` };
  return { text, raw: null };
}
