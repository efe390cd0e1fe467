// An agent's Dreams page: the dreaming status, Run now with progress, the pending proposals
// (dreams_proposals.js), the last answer's report and the runs (dreams_history.js). Every answer
// or refusal is shown as the suite words it; a read-only key sees it all with no button.

import { pageLinks } from "./agents.js";
import { agentPath, call } from "./api.js";
import { append, clear, el } from "./dom.js";
import { History } from "./dreams_history.js";
import { proposalItem } from "./dreams_ops.js";
import { showPending } from "./dreams_proposals.js";
import { Progress, runForm } from "./dreams_run.js";
import { when } from "./format.js";

// While a run the page did not start is in progress, the page reads the status this often.
const BUSY_MS = 2000;

class DreamsPage {
  constructor(root, agentId, writable) {
    this.root = root;
    this.agentId = agentId;
    this.writable = writable;
    this.busy = false;
    this.message = el("p", { id: "dream-message", className: "muted" });
    this.message.setAttribute("role", "status");
    this.progress = new Progress(agentId);
    this.status = el("section", { id: "dream-status" });
    this.pending = el("section", { id: "dream-pending" });
    this.report = el("section", { id: "dream-report" });
    this.history = new History(this, el("section", { id: "dream-history" }));
  }

  say(text, bad = false) {
    this.message.className = bad ? "error" : "muted";
    this.message.textContent = text;
  }

  post(rest, body) {
    return call("POST", agentPath(this.agentId, rest), { body });
  }

  enable(on) {
    for (const button of this.root.querySelectorAll("button")) button.disabled = !on;
  }

  // Run `work` with every button disabled, show a refusal as the suite words it, then read again;
  // the page's data-busy attribute is there until all of it is done.
  async act(label, work) {
    this.busy = true;
    this.root.dataset.busy = "yes";
    this.say(`${label}…`);
    this.enable(false);
    try {
      await work();
    } catch (err) {
      this.say(`${label}: refused: ${err.message}`, true);
    }
    await this.refresh();
    this.busy = false;
    delete this.root.dataset.busy;
  }

  revert(runId, opId) {
    return this.act(`reverting ${opId || `every op of ${runId}`}`, async () => {
      const reply = await this.post("/dream:revert", { runId, opId });
      const undone = (reply.reverted || []).join(", ") || "nothing";
      this.say(`${(reply.message || "reverted").trim()} (undone: ${undone})`);
    });
  }

  async show() {
    clear(this.root);
    append(this.root, [
      el("h2", {}, "Dreams of ", el("span", { className: "agent-name" }, this.agentId)),
      pageLinks(this.agentId, "dreams"),
      this.writable ? runForm(this, this.progress) : el("p", { className: "read-only" }, "read only: this key cannot run, accept, reject or revert"),
      this.progress.node, this.message, this.status, this.pending, this.report, this.history.root,
    ]);
    await this.refresh();
  }

  async refresh() {
    try {
      const status = await call("GET", agentPath(this.agentId, "/dream:status"));
      this.showStatus(status);
      showPending(this, this.pending, status.pending || []);
      await this.history.refresh();
      this.enable(!status.running);
      if (status.running) setTimeout(() => this.root.contains(this.status) && !this.busy && this.refresh(), BUSY_MS);
    } catch (err) {
      this.enable(true);
      this.say(`cannot read the dreams: ${err.message}`, true);
    }
  }

  showStatus(status) {
    const last = status.lastRun || {};
    clear(this.status);
    append(this.status, [
      el("h3", {}, "Status"),
      el("p", {}, status.scheduled ? `scheduled (${status.mode} mode), next run ${when(status.nextRunAt)}` : `not scheduled (${status.mode} mode)`),
      status.running ? el("p", { id: "run-in-progress" }, `a run is in progress, at step ${status.running}`) : null,
      last.runId
        ? el("p", { id: "last-run" }, "last run ", el("code", {}, last.runId), ` (${last.trigger}, ${last.mode}) ${last.status} at ${when(last.startedAt)}`,
          last.reason ? el("span", { className: "muted" }, `: ${last.reason}`) : null)
        : el("p", { className: "muted" }, "last run: none yet"),
    ]);
  }

  // The answer of Run now or Accept (DreamReport), each applied op with its own Revert.
  showReport(report) {
    this.say(`run ${report.runId}: ${report.status}${report.reason ? `: ${report.reason}` : ""}`);
    clear(this.report);
    const ops = report.ops || [];
    append(this.report, [
      el("h3", {}, "Run ", el("code", {}, report.runId || ""), ` (${report.trigger}, ${report.mode}): ${report.status}`),
      (report.steps || []).length ? el("p", { className: "muted" }, "steps: ", report.steps.join(" → ")) : null,
      (report.notes || []).length ? el("ul", { className: "notes" }, report.notes.map((n) => el("li", {}, n))) : null,
      el("ul", { className: "ops" }, ops.map((op) => {
        if (!this.writable || op.status !== "applied") return proposalItem(op);
        const undo = el("button", { type: "button", className: "revert-one" }, "Revert");
        undo.addEventListener("click", () => this.revert(report.runId, op.opId));
        return proposalItem(op, undo);
      })),
    ]);
  }
}

export async function showDreams(root, agentId, writable) {
  await new DreamsPage(root, agentId, writable).show();
}
