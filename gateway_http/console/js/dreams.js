// An agent's Dreams page: the dreaming status, pending proposals as diffs with Accept, Run now,
// and Revert of a run or one op, each answer or refusal shown as the suite words it.

import { agentHref } from "./agents.js";
import { agentPath, call } from "./api.js";
import { append, clear, el } from "./dom.js";
import { when } from "./format.js";

// A proposal or op as a unified diff: the text it takes out (-) and the text it puts in (+).
export function diff(op) {
  const lines = [];
  if (op.target && op.op !== "add") {
    for (const line of op.target.split("\n")) lines.push(el("div", { className: "del" }, `- ${line}`));
  }
  if (op.content && op.op !== "remove") {
    for (const line of op.content.split("\n")) lines.push(el("div", { className: "ins" }, `+ ${line}`));
  }
  return el("div", { className: "diff" }, lines);
}

function opItem(op, extra) {
  const item = el("li", { className: `op op-${op.status}` },
    el("div", {}, el("code", {}, op.status === "proposed" && op.proposalId ? op.proposalId : op.opId), " ", `${op.op} ${op.file}`,
      el("span", { className: "muted" }, ` · ${op.status}`)),
    op.proposalReason ? el("div", { className: "muted" }, "reviewer: ", op.proposalReason) : null,
    op.reason ? el("div", { className: "muted" }, op.reason) : null,
    diff(op), extra);
  item.dataset.op = op.opId || "";
  item.dataset.proposal = op.proposalId || "";
  return item;
}

class DreamsPage {
  constructor(root, agentId, writable) {
    this.root = root;
    this.agentId = agentId;
    this.writable = writable;
    this.message = el("p", { id: "dream-message" });
    this.message.setAttribute("role", "status");
    this.status = el("section", { id: "dream-status" });
    this.pending = el("section", { id: "dream-pending" });
    this.report = el("section", { id: "dream-report" });
  }

  say(text, bad = false) {
    this.message.className = bad ? "error" : "muted";
    this.message.textContent = text;
  }

  async act(label, work) {
    this.say(`${label}…`);
    for (const button of this.root.querySelectorAll("button")) button.disabled = true;
    try {
      await work();
    } catch (err) {
      this.say(`${label}: refused: ${err.message}`, true);
    } finally {
      for (const button of this.root.querySelectorAll("button")) button.disabled = false;
    }
    try {
      await this.refresh();
    } catch (err) {
      this.say(`cannot read the dreaming status: ${err.message}`, true);
    }
  }

  async show() {
    clear(this.root);
    append(this.root, [
      el("h2", {}, "Dreams of ", el("span", { className: "agent-name" }, this.agentId)),
      el("p", {}, el("a", { href: "#/agents" }, "all agents"), " · ", el("a", { href: agentHref(this.agentId, "memory") }, "memory")),
      this.writable ? this.runForm() : el("p", { className: "read-only" }, "read only: this key cannot run, accept or revert"),
      this.message, this.status, this.pending, this.report,
    ]);
    await this.refresh();
  }

  runForm() {
    const mode = el("select", { id: "dream-mode" }, el("option", { value: "propose" }, "propose"), el("option", { value: "auto" }, "auto"));
    const run = el("button", { type: "button", id: "dream-run" }, "Run now");
    run.addEventListener("click", () => this.act(`dreaming in ${mode.value} mode`, async () => {
      const report = await call("POST", agentPath(this.agentId, "/dream:run"), { body: { mode: mode.value } });
      this.showReport(report);
    }));
    return el("div", { className: "dream-run" }, mode, " ", run);
  }

  async refresh() {
    const status = await call("GET", agentPath(this.agentId, "/dream:status"));
    this.showStatus(status);
    this.showPending(status.pending || []);
  }

  showStatus(status) {
    const last = status.lastRun || {};
    clear(this.status);
    append(this.status, [
      el("h3", {}, "Status"),
      el("p", {}, status.scheduled ? `scheduled (${status.mode} mode), next run ${when(status.nextRunAt)}` : `not scheduled (${status.mode} mode)`),
      last.runId
        ? el("p", { id: "last-run" }, "last run ", el("code", {}, last.runId), ` (${last.trigger}, ${last.mode}) ${last.status} at ${when(last.startedAt)}`,
          last.reason ? el("span", { className: "muted" }, `: ${last.reason}`) : null)
        : el("p", { className: "muted" }, "last run: none yet"),
      this.writable && last.runId ? this.revertForm(last.runId) : null,
    ]);
  }

  revertForm(runId) {
    const whole = el("button", { type: "button", id: "revert-run" }, "Revert this run");
    whole.addEventListener("click", () => this.revert(runId, ""));
    const number = el("input", { type: "number", id: "revert-op-number", min: 1 });
    number.placeholder = "op n";
    const one = el("button", { type: "button", id: "revert-op" }, "Revert op");
    one.addEventListener("click", () => this.revert(runId, number.value));
    return el("div", { className: "revert" }, whole, " or ", number, " ", one);
  }

  revert(runId, opId) {
    return this.act(`reverting ${opId ? `op ${opId} of ` : ""}${runId}`, async () => {
      const reply = await call("POST", agentPath(this.agentId, "/dream:revert"), { body: { runId, opId } });
      const undone = (reply.reverted || []).join(", ") || "nothing";
      this.say(`${reply.message || "reverted"} (undone: ${undone})`);
    });
  }

  showPending(ops) {
    clear(this.pending);
    this.pending.append(el("h3", {}, `Pending proposals (${ops.length})`));
    if (!ops.length) {
      this.pending.append(el("p", { className: "muted" }, "none"));
      return;
    }
    const boxes = [];
    const list = el("ul", { className: "ops" }, ops.map((op) => {
      if (!this.writable) return opItem(op, null);
      const box = el("input", { type: "checkbox", className: "choose", value: op.proposalId });
      boxes.push(box);
      return opItem(op, el("label", {}, box, " accept"));
    }));
    this.pending.append(list);
    if (this.writable) {
      const accept = el("button", { type: "button", id: "accept" }, "Accept selected");
      accept.addEventListener("click", () => {
        const ids = boxes.filter((b) => b.checked).map((b) => b.value);
        if (!ids.length) {
          this.say("choose the proposals to accept first", true);
          return;
        }
        this.act(`accepting ${ids.join(", ")}`, async () => this.showReport(
          await call("POST", agentPath(this.agentId, "/dream:accept"), { body: { ids } })));
      });
      this.pending.append(accept);
    }
  }

  showReport(report) {
    this.say(`run ${report.runId}: ${report.status}${report.reason ? `: ${report.reason}` : ""}`);
    clear(this.report);
    const ops = report.ops || [];
    append(this.report, [
      el("h3", {}, "Run ", el("code", {}, report.runId || ""), ` (${report.trigger}, ${report.mode}): ${report.status}`),
      el("ul", { className: "ops" }, ops.map((op) => {
        if (!this.writable || op.status !== "applied") return opItem(op, null);
        const undo = el("button", { type: "button", className: "revert-one" }, "Revert");
        undo.addEventListener("click", () => this.revert(report.runId, op.opId));
        return opItem(op, undo);
      })),
    ]);
  }
}

export async function showDreams(root, agentId, writable) {
  await new DreamsPage(root, agentId, writable).show();
}
