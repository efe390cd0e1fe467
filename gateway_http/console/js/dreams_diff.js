// Unified diffs of what an op changed (or would change): the lines it takes out (-), the lines it
// puts in (+) and the lines both sides share, each a text node.

import { el } from "./dom.js";

// Past this many line pairs the diff is not searched: every old line out, then every new line in.
const MAX_CELLS = 250000;

function lines(text) {
  if (!text) return [];
  const out = text.split("\n");
  if (out[out.length - 1] === "") out.pop();
  return out;
}

// [kind, line] pairs, kind " ", "-" or "+", from the longest common subsequence of lines.
export function lineDiff(before, after) {
  const a = lines(before);
  const b = lines(after);
  if (a.length * b.length > MAX_CELLS) {
    return [...a.map((line) => ["-", line]), ...b.map((line) => ["+", line])];
  }
  const common = Array.from({ length: a.length + 1 }, () => new Int32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push([" ", a[i++]]);
      j++;
    } else if (i < a.length && (j === b.length || common[i + 1][j] >= common[i][j + 1])) {
      out.push(["-", a[i++]]);
    } else {
      out.push(["+", b[j++]]);
    }
  }
  return out;
}

const CLASS = { "-": "del", "+": "ins", " ": "same" };

// The diff of `before` into `after` as a block, under an optional heading (file and lines).
export function diffView(before, after, heading = null) {
  const rows = lineDiff(before, after).map(([kind, line]) => el("div", { className: CLASS[kind] }, `${kind} ${line}`));
  if (!rows.length) rows.push(el("div", { className: "muted" }, "(no text)"));
  return el("div", { className: "diff" }, heading ? el("div", { className: "diff-head" }, heading) : null, rows);
}

// A proposal (DreamOp) as the diff it would make: its target out, its content in.
export function proposalDiff(op) {
  return diffView(op.op === "add" ? "" : op.target, op.op === "remove" ? "" : op.content);
}

function where(change) {
  const span = change.startLine ? `, lines ${change.startLine}-${change.endLine} now` : "";
  return `${change.file}${span}${change.cut ? " (cut at 4000 characters)" : ""}`;
}

// An op of the runs list (DreamRunOp) as one diff per change (OpChange), each under its file.
export function changesDiff(op) {
  const changes = op.changes || [];
  if (!changes.length) return el("div", { className: "diff muted" }, "no text recorded for this op");
  return changes.map((change) => diffView(change.before, change.after, where(change)));
}
