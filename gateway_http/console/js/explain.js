// "Where did this go?" on the Memory page: an entry's history as `gateway dream explain` gives it
// (GET .../dream:explain, Dreaming.ExplainEntry): where it stands now, and each move or edit that
// took it there, with the run, the op and the reason. Every piece is rendered as text.

import { agentPath } from "./api.js";
import { el } from "./dom.js";
import { queryForm } from "./query_form.js";

function placeLine(place) {
  return el("li", {}, "stands in ", el("code", {}, `${place.path}:${place.startLine}-${place.endLine}`), ` (${place.state})`);
}

function eventLine(event) {
  const where = event.opId ? ` [${event.opId}]` : "";
  return el("li", { className: `event event-${event.kind}` },
    el("span", { className: "muted" }, event.at || "?"), " ", el("strong", {}, event.kind), ` ${event.detail}${where}`);
}

function lifeLine(entry) {
  if (!entry.firstSeen) {
    return null;
  }
  const count = Number(entry.retrievalCount || 0);
  const retrieved = count ? `${count} times, last at ${entry.lastRetrieved}` : "never";
  return el("p", { className: "muted" }, `first seen ${entry.firstSeen} in ${entry.firstPath}; retrieved ${retrieved}`,
    entry.supersedesKey ? `; supersedes ${entry.supersedesKey}` : "");
}

function entryItem(entry) {
  const places = entry.places || [];
  return el("li", { className: "explained" },
    el("pre", { className: "snippet" }, entry.text || "(text not found)"),
    el("ul", { className: "places" }, places.length ? places.map(placeLine)
      : el("li", {}, entry.entryHash ? "stands in no file now" : "not in the archive: found in the dreams' journal only")),
    lifeLine(entry),
    el("ol", { className: "events" }, (entry.events || []).map(eventLine)));
}

// The "where did this go?" box of `agentId`'s Memory page.
export function explainForm(agentId) {
  const { form, status, results } = queryForm({
    name: "explain", listId: "explain-entries", listClass: "explained-list", placeholder: "words of an entry that left MEMORY.md",
    button: "Explain", route: agentPath(agentId, "/dream:explain"), busy: "looking…", failed: "explain failed",
    show: (reply) => {
      const entries = reply.entries || [];
      const status = entries.length ? `${entries.length} entr${entries.length === 1 ? "y" : "ies"}` : (reply.text || "").trim();
      return { status, items: entries.map(entryItem) };
    },
  });
  return el("section", { className: "explain" }, el("h3", {}, "Where did this go?"),
    el("p", { className: "muted" }, "Where an entry stands now and every dream move or edit that took it there, with the run and the reason."),
    form, status, results);
}
