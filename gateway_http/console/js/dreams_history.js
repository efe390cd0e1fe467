// The agent's runs newest first (GET dream:runs, paged by "Older runs"): trigger, mode, steps,
// status, reason, each op with its diff; for a write key, Revert on a run and on each applied op.

import { agentPath, call } from "./api.js";
import { clear, el } from "./dom.js";
import { runOpItem } from "./dreams_ops.js";
import { when } from "./format.js";

const PAGE = 20;
const MOST = 100;

function revertButton(page, text, className, runId, opId) {
  const node = el("button", { type: "button", className }, text);
  node.addEventListener("click", () => page.revert(runId, opId));
  return node;
}

function runEntry(page, run) {
  const ops = run.ops || [];
  const applied = ops.some((op) => op.status === "applied");
  const more = (run.opsTotal || 0) - ops.length;
  const node = el("article", { className: "run" },
    el("h4", {}, el("code", {}, run.runId), ` ${run.trigger}, ${run.mode}: `,
      el("span", { className: `run-status status-${run.status}` }, run.status), ` · ${when(run.startedAt)}`),
    run.reason ? el("p", { className: "run-reason" }, run.reason) : null,
    run.summary ? el("p", { className: "muted" }, "reviewer: ", run.summary) : null,
    (run.steps || []).length ? el("p", { className: "muted" }, "steps: ", run.steps.join(" → ")) : null,
    (run.notes || []).length ? el("ul", { className: "notes" }, run.notes.map((n) => el("li", {}, n))) : null,
    page.writable && applied ? revertButton(page, "Revert this run", "revert-run", run.runId, "") : null,
    ops.length ? el("ul", { className: "ops" }, ops.map((op) => runOpItem(op,
      page.writable && op.status === "applied" ? revertButton(page, "Revert this op", "revert-one", run.runId, op.opId) : null)))
      : el("p", { className: "muted" }, "no ops"),
    more > 0 ? el("p", { className: "muted" }, `${more} more ops not shown`) : null);
  node.dataset.run = run.runId;
  return node;
}

// The runs list in `root`, kept as long as the page is shown.
export class History {
  constructor(page, root) {
    this.page = page;
    this.root = root;
    this.list = el("div", { className: "runs" });
    this.cut = el("ul", { className: "notes muted" });
    this.older = el("button", { type: "button", id: "older-runs", hidden: true }, "Older runs");
    this.older.addEventListener("click", () => this.more());
    this.next = "";
    this.shown = 0;
  }

  async fetch(size, token) {
    const query = new URLSearchParams({ pageSize: String(size) });
    if (token) query.set("pageToken", token);
    return call("GET", `${agentPath(this.page.agentId, "/dream:runs")}?${query}`);
  }

  // The newest runs again, as many as were shown (at least one page).
  async refresh() {
    const reply = await this.fetch(Math.min(MOST, Math.max(PAGE, this.shown)), "");
    clear(this.root);
    clear(this.list);
    clear(this.cut);
    this.shown = 0;
    this.root.append(el("h3", {}, "History"), this.cut, this.list, this.older);
    this.add(reply);
  }

  async more() {
    this.older.disabled = true;
    try {
      this.add(await this.fetch(PAGE, this.next));
    } catch (err) {
      this.page.say(`cannot read older runs: ${err.message}`, true);
    } finally {
      this.older.disabled = false;
    }
  }

  add(reply) {
    const runs = reply.runs || [];
    if (!runs.length && !this.shown) this.list.append(el("p", { className: "muted" }, "no runs yet"));
    this.list.append(...runs.map((run) => runEntry(this.page, run)));
    this.cut.append(...(reply.cut || []).map((line) => el("li", {}, line)));
    this.shown += runs.length;
    this.next = reply.nextPageToken || "";
    this.older.hidden = !this.next;
  }
}
