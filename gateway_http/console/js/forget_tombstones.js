// The tombstones of an agent on its Memory page (GET .../tombstones, Dreaming.ListTombstones): id,
// scope, words, when and by which key, places; each with Lift (POST .../tombstones/ID:lift), asked
// twice. Only a key that may forget may list them: another is told so, as the suite words it.

import { agentPath, ApiError, call } from "./api.js";
import { clear, el } from "./dom.js";
import { when } from "./format.js";

// The refusal of a forget call as the page says it: a key that may not forget, or the suite's message.
export function refusal(err, doing, shared = false) {
  if (err instanceof ApiError && err.status === 403) {
    const where = shared ? " in the shared vault (that needs a key whose scope is every agent, \"*\")" : "";
    return `This key cannot forget${where}: ${err.message}`;
  }
  if (err instanceof ApiError && err.status === 400) return `Not accepted: ${err.message}`;
  return `${doing} failed: ${err.message}`;
}

export class Tombstones {
  constructor(agentId) {
    this.agentId = agentId;
    this.status = el("p", { id: "tombstones-status", className: "muted" });
    this.status.setAttribute("role", "status");
    this.rows = el("tbody", { id: "tombstones-rows" });
    this.table = el("table", { id: "tombstones-table", hidden: true },
      el("thead", {}, el("tr", {}, ["Tombstone", "Scope", "Words", "When", "By", "Places", ""].map((h) => el("th", {}, h)))),
      this.rows);
    this.root = el("section", { className: "tombstones", id: "tombstones" }, el("h4", {}, "Tombstones"),
      el("p", { className: "muted" }, "What was forgotten, without the text: the suite refuses or flags it where it would",
        " write it again. Lifting one lets the text come back; it does not restore it."),
      this.status, this.table);
  }

  say(text, bad = false) {
    this.status.className = bad ? "error" : "muted";
    this.status.textContent = text;
  }

  async refresh() {
    let reply;
    try {
      reply = await call("GET", agentPath(this.agentId, "/tombstones"));
    } catch (err) {
      this.table.hidden = true;
      this.say(refusal(err, "Listing the tombstones"), true);
      return;
    }
    const list = reply.tombstones || [];
    clear(this.rows);
    this.rows.append(...list.map((t) => this.row(t)));
    this.table.hidden = !list.length;
    this.say(list.length ? `${list.length} tombstone${list.length === 1 ? "" : "s"}` : "none: nothing of this agent is forgotten");
  }

  row(tomb) {
    const id = tomb.tombstoneId || "";
    const scope = tomb.scope === "*" ? "* (the shared vault, every agent)" : tomb.scope;
    const cell = el("div", { className: "op-controls" });
    const base = id.split(".")[0];
    if (base !== id) {
      cell.append(el("span", { className: "muted" }, "lifted with ", el("code", {}, base)));
    } else {
      const lift = el("button", { type: "button", className: "lift" }, "Lift");
      lift.addEventListener("click", () => this.ask(cell, id));
      cell.append(lift);
    }
    const row = el("tr", {}, el("td", {}, el("code", {}, id)), el("td", {}, scope), el("td", {}, String(tomb.words ?? "")),
      el("td", {}, when(tomb.at)), el("td", {}, tomb.by || ""), el("td", {}, String(tomb.places ?? "")), el("td", {}, cell));
    row.dataset.tombstone = id;
    return row;
  }

  // The second ask: what lifting does, then Lift it or Cancel.
  ask(cell, id) {
    const yes = el("button", { type: "button", className: "lift-yes" }, `Yes, lift ${id}`);
    const no = el("button", { type: "button", className: "lift-no" }, "Cancel");
    const question = el("span", { className: "lift-question" },
      `Lift ${id}? The forgotten text may then be written back and served again; what the forget replaced stays replaced.`);
    const before = [...cell.childNodes];
    clear(cell);
    cell.append(question, yes, no);
    no.addEventListener("click", () => cell.replaceChildren(...before));
    yes.addEventListener("click", async () => {
      yes.disabled = no.disabled = true;
      try {
        const reply = await call("POST", agentPath(this.agentId, `/tombstones/${encodeURIComponent(id)}:lift`), { body: {} });
        const lifted = (reply.tombstones || []).map((t) => t.tombstoneId);
        await this.refresh();
        this.say(`Lifted ${lifted.join(", ") || id}.`);
      } catch (err) {
        cell.replaceChildren(...before);
        this.say(refusal(err, `Lifting ${id}`), true);
      }
    });
  }
}
