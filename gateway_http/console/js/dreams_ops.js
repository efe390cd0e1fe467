// One op as a list item: its id, what it does to which file, its status, the reviewer's reason,
// what the guards or a person said of it, and its diff; `controls` (buttons) at the end.

import { el } from "./dom.js";
import { changesDiff, proposalDiff } from "./dreams_diff.js";
import { when } from "./format.js";

function head(id, op, status) {
  const where = op.tier === "episodic" && op.topic ? `${op.file} (episodic, ${op.topic})` : op.file;
  return el("div", { className: "op-head" }, el("code", {}, id), " ", `${op.op} ${where}`,
    el("span", { className: `op-status status-${status}` }, ` · ${status}`));
}

function item(op, status, parts) {
  const node = el("li", { className: `op op-${status}` }, ...parts);
  node.dataset.op = op.opId || "";
  node.dataset.proposal = op.proposalId || "";
  return node;
}

function said(label, text) {
  return text ? el("div", { className: "muted" }, label, text) : null;
}

// A proposal or an op of a run's report (DreamOp): target and content as the diff.
export function proposalItem(op, controls = null) {
  const id = op.status === "proposed" && op.proposalId ? op.proposalId : op.opId;
  return item(op, op.status, [head(id, op, op.status), said("reviewer: ", op.proposalReason),
    said(op.status === "skipped" ? "skipped: " : "", op.reason), proposalDiff(op), controls]);
}

function decision(op) {
  if (op.status === "rejected") return `rejected by ${op.decidedBy || "unknown"} at ${when(op.decidedAt)}`;
  if (op.status === "accepted") return `accepted${op.decidedBy ? ` by run ${op.decidedBy}` : ""}${op.decidedAt ? ` at ${when(op.decidedAt)}` : ""}`;
  return "";
}

// An op of the runs list (DreamRunOp): its status now, who decided it, one diff per change.
export function runOpItem(op, controls = null) {
  const status = op.status === "proposed" && op.pending ? "pending" : op.status;
  const guard = op.status === "skipped" ? "skipped: " : "";
  return item(op, op.status, [head(op.opId, op, status), said("reviewer: ", op.proposalReason), said(guard, op.reason),
    said("", decision(op)), op.proposalId ? el("div", { className: "muted" }, "proposal ", el("code", {}, op.proposalId)) : null,
    changesDiff(op), controls]);
}
