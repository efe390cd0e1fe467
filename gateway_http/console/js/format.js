// Numbers and times as the console shows them.

export function chars(n) {
  return Number(n || 0).toLocaleString("en-US");
}

// "3 min ago" from milliseconds since the epoch (int64 arrives as a string in protojson).
export function ago(ms, now = Date.now()) {
  const when = Number(ms || 0);
  if (!when) {
    return "none";
  }
  const s = Math.max(0, Math.round((now - when) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

// An ISO 8601 time as "YYYY-MM-DD HH:MM UTC"; "" for none.
export function when(iso) {
  if (!iso) return "";
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  return `${t.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}
