// The report of a forget (POST .../memory:forget, Dreaming.Forget) as the Memory page shows it: the
// places per store with their counts and line numbers, whether an apply rewrote each or why it left
// it, the transcripts it lists and never rewrites, and the databases' bytes after a purge. The
// report never holds the forgotten text; its paths and reasons are rendered as text all the same.

import { el } from "./dom.js";
import { chars } from "./format.js";

export const TRANSCRIPTS = "transcripts";

function plural(n, one, many = `${one}s`) {
  return `${chars(n)} ${Number(n) === 1 ? one : many}`;
}

function linesText(place) {
  const lines = (place.lines || []).map(Number);
  if (!lines.length) return "";
  const more = Number(place.count || 0) > lines.length ? ", …" : "";
  return ` (${lines.length === 1 ? "line" : "lines"} ${lines.join(", ")}${more})`;
}

function placeItem(place, applied) {
  const kind = place.kind && place.kind !== "file" ? ` [${place.kind}]` : "";
  let outcome = null;
  if (place.changed) outcome = el("span", { className: "forget-rewritten" }, " rewritten");
  else if (place.left && applied) outcome = el("span", { className: "error" }, ` left: ${place.left}`);
  else if (place.left) outcome = el("span", { className: "muted" }, ` will be left: ${place.left}`);
  else if (applied) outcome = el("span", { className: "muted" }, " not rewritten");
  const item = el("li", { className: "forget-place" }, el("code", {}, place.path || ""), kind,
    `: ${plural(place.count || 0, "match", "matches")}${linesText(place)}`, outcome);
  item.dataset.store = place.store || "";
  item.dataset.path = place.path || "";
  return item;
}

// The places the confirmation counts: every place but the transcripts, which are never rewritten.
export function rewritable(report) {
  return (report.places || []).filter((p) => p.store !== TRANSCRIPTS);
}

function summary(report) {
  const places = report.places || [];
  if (report.applied) {
    return `Forgotten: ${plural(report.matches || 0, "match", "matches")} replaced in ${plural(report.changed || 0, "place")}` +
      ` by the marker [forgotten ${report.tombstoneId}]; ${plural(report.tombstones || 0, "tombstone")} written.`;
  }
  if (!places.length) {
    return "Found nowhere. A forget would still record a tombstone, in case the text is on its way (in a transcript the next dream reads).";
  }
  return `Preview (nothing changed): ${plural(report.matches || 0, "match", "matches")} in ${plural(places.length, "place")}.`;
}

// The report as an element: a summary line, then one list per store, then the purges.
export function reportView(report) {
  const places = report.places || [];
  const stores = new Map();
  for (const place of places) {
    if (!stores.has(place.store)) stores.set(place.store, []);
    stores.get(place.store).push(place);
  }
  const view = el("div", { id: "forget-report-body" }, el("p", { id: "forget-summary" }, summary(report)));
  if (report.applied && report.tombstoneId) {
    view.append(el("p", {}, "Tombstone ", el("code", { id: "forget-tombstone" }, report.tombstoneId),
      ": the text is refused or flagged wherever the suite would write it again."));
  }
  for (const [store, list] of stores) {
    const group = el("div", { className: "forget-store" }, el("h4", {}, store),
      el("ul", { className: "places" }, list.map((p) => placeItem(p, report.applied))));
    group.dataset.store = store;
    if (store === TRANSCRIPTS) {
      group.append(el("p", { className: "muted" }, "Transcripts are the agent runtime's files: a forget lists them and never",
        " rewrites them. To purge one, end the agent's session, then delete the file or remove the lines named here."));
    }
    view.append(group);
  }
  const purges = report.purges || [];
  if (purges.length) {
    view.append(el("h4", {}, "databases"), el("ul", { className: "places", id: "forget-purges" }, purges.map((p) => el("li", {},
      `${p.store}: bytes purged (${chars(p.bytesBefore)} → ${chars(p.bytesAfter)} bytes, ${Number(p.seconds || 0).toFixed(2)} s)`))));
  }
  return view;
}
