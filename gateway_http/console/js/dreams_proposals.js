// The pending proposals of propose mode: each with its diff and, for a write key, Accept and
// Reject of its own and a box to choose it for Accept selected / Reject selected.

import { clear, el } from "./dom.js";
import { proposalItem } from "./dreams_ops.js";

function button(text, props, onClick) {
  const node = el("button", { type: "button", ...props }, text);
  node.addEventListener("click", onClick);
  return node;
}

// Accept (the applier applies them, through the guards) or reject (recorded with the key's label)
// the proposals `ids`; the page shows the answer and reads the status again.
function decide(page, verb, ids) {
  if (!ids.length) {
    page.say(`choose the proposals to ${verb} first`, true);
    return;
  }
  page.act(`${verb === "accept" ? "accepting" : "rejecting"} ${ids.join(", ")}`, async () => {
    const reply = await page.post(`/dream:${verb}`, { ids });
    if (verb === "accept") page.showReport(reply);
    else page.say((reply.text || "rejected").trim());
  });
}

function controls(page, op, boxes) {
  const box = el("input", { type: "checkbox", className: "choose", value: op.proposalId, title: `choose ${op.proposalId}` });
  boxes.push(box);
  return el("div", { className: "op-controls" }, el("label", {}, box, " choose"), " ",
    button("Accept", { className: "accept-one" }, () => decide(page, "accept", [op.proposalId])), " ",
    button("Reject", { className: "reject-one" }, () => decide(page, "reject", [op.proposalId])));
}

// Fill `root` with the proposals `ops` (DreamStatus.pending).
export function showPending(page, root, ops) {
  clear(root);
  root.append(el("h3", {}, `Pending proposals (${ops.length})`));
  if (!ops.length) {
    root.append(el("p", { className: "muted" }, "none"));
    return;
  }
  const boxes = [];
  root.append(el("ul", { className: "ops" }, ops.map((op) => proposalItem(op, page.writable ? controls(page, op, boxes) : null))));
  if (!page.writable) return;
  const chosen = () => boxes.filter((b) => b.checked).map((b) => b.value);
  root.append(el("div", { className: "op-controls" },
    button("Accept selected", { id: "accept" }, () => decide(page, "accept", chosen())), " ",
    button("Reject selected", { id: "reject" }, () => decide(page, "reject", chosen())),
    el("span", { className: "muted" }, " accepted proposals are applied through the same guards as a run; a rejected text is not proposed again")));
}
