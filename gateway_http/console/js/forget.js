// Forget… on an agent's Memory page (docs/concepts/forget.md): a text, or a pattern, and "shared
// vault too"; Preview runs the dry run (POST .../memory:forget without apply) and shows where it is
// (forget_report.js); Forget asks again, naming the places, then applies and shows the tombstone and
// what was replaced; the tombstones follow, each with Lift (forget_tombstones.js).
//
// What is typed is the thing being forgotten: it goes in the POST's body only (never in the address,
// storage or a log), the browser is asked not to remember it, and the field is emptied once applied.

import { agentPath, call } from "./api.js";
import { clear, el } from "./dom.js";
import { reportView, rewritable } from "./forget_report.js";
import { refusal, Tombstones } from "./forget_tombstones.js";

function checkbox(id, label) {
  const box = el("input", { type: "checkbox", id });
  return { box, label: el("label", {}, box, ` ${label}`) };
}

class ForgetBox {
  constructor(agentId, onApplied) {
    this.agentId = agentId;
    this.onApplied = onApplied;
    this.previewed = null; // the body the report shown was made for; Forget applies only that
    this.input = el("input", { type: "text", id: "forget-text" });
    this.input.autocomplete = "off";
    this.input.spellcheck = false;
    this.input.placeholder = "the text to forget, as it was written";
    this.pattern = checkbox("forget-pattern", "a pattern (a regular expression, searched line by line)");
    this.shared = checkbox("forget-shared", "shared vault too (needs a key whose scope is every agent, \"*\")");
    this.preview = el("button", { type: "submit", id: "forget-preview" }, "Preview");
    this.apply = el("button", { type: "button", id: "forget-apply", disabled: true }, "Forget…");
    this.form = el("form", { id: "forget-form" }, el("div", { className: "forget-line" }, this.input, this.preview, this.apply),
      el("div", { className: "forget-line" }, this.pattern.label, this.shared.label));
    this.form.autocomplete = "off";
    this.confirm = el("div", { id: "forget-confirm", hidden: true });
    this.status = el("p", { id: "forget-status", className: "muted" });
    this.status.setAttribute("role", "status");
    this.report = el("div", { id: "forget-report" });
    this.tombstones = new Tombstones(agentId);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault(); // a form's own submit would put the text in the address
      this.runPreview();
    });
    this.input.addEventListener("input", () => this.changed());
    for (const box of [this.pattern.box, this.shared.box]) box.addEventListener("change", () => this.changed());
    this.apply.addEventListener("click", () => this.ask());
  }

  say(text, bad = false) {
    this.status.className = bad ? "error" : "muted";
    this.status.textContent = text;
  }

  body(apply) {
    const what = this.pattern.box.checked ? { pattern: this.input.value } : { text: this.input.value };
    return { ...what, shared: this.shared.box.checked, apply };
  }

  // A change after a preview makes it stale: its report and status go, and Forget waits for a new one.
  changed() {
    if (this.previewed && JSON.stringify(this.body(false)) === JSON.stringify(this.previewed.body)) return;
    this.previewed = null;
    this.apply.disabled = true;
    this.confirm.hidden = true;
    clear(this.confirm);
    clear(this.report);
    this.say("");
  }

  busy(on) {
    for (const node of [this.input, this.pattern.box, this.shared.box, this.preview]) node.disabled = on;
    this.apply.disabled = on || !this.previewed;
  }

  post(body) {
    return call("POST", agentPath(this.agentId, "/memory:forget"), { body });
  }

  async runPreview() {
    this.previewed = null;
    this.changed();
    const body = this.body(false);
    this.say("previewing…");
    this.busy(true);
    try {
      const report = await this.post(body);
      this.previewed = { body, report };
      this.report.append(reportView(report));
      this.say("Nothing was changed. Forget… replaces every place but the transcripts, after asking.");
    } catch (err) {
      this.say(refusal(err, "Preview", body.shared), true);
    } finally {
      this.busy(false);
    }
  }

  // The second ask, naming how many places will be rewritten and that it cannot be undone.
  ask() {
    if (!this.previewed) return;
    const { body, report } = this.previewed;
    const n = rewritable(report).length;
    const listed = (report.places || []).length - n;
    const where = `${n} place${n === 1 ? "" : "s"} of ${this.agentId}'s memory${body.shared ? " and the shared vault" : ""}`;
    const lines = [
      n ? `This replaces the text in ${where} with a marker, and keeps it nowhere. It cannot be undone: lifting the tombstone later lets the text come back, it does not restore it.`
        : "The text is in no place the suite keeps now: the forget records a tombstone only, so it is refused if it comes back.",
      listed ? `${listed} transcript${listed === 1 ? "" : "s"} holding it (the runtime's files) will be listed and left as ${listed === 1 ? "it is" : "they are"}.` : null,
    ];
    const yes = el("button", { type: "button", id: "forget-yes" }, n ? `Yes, forget it in ${n} place${n === 1 ? "" : "s"}` : "Yes, record the tombstone");
    const no = el("button", { type: "button", id: "forget-no" }, "Cancel");
    no.addEventListener("click", () => {
      this.confirm.hidden = true;
      clear(this.confirm);
    });
    yes.addEventListener("click", () => this.runApply(body));
    clear(this.confirm);
    this.confirm.append(...lines.filter(Boolean).map((line) => el("p", {}, line)), el("div", { className: "op-controls" }, yes, no));
    this.confirm.hidden = false;
  }

  async runApply(previewed) {
    const body = { ...previewed, apply: true };
    this.confirm.hidden = true;
    clear(this.confirm);
    this.say("forgetting…");
    this.busy(true);
    try {
      const report = await this.post(body);
      this.input.value = ""; // the thing forgotten leaves the page too
      this.previewed = null;
      clear(this.report);
      this.report.append(reportView(report));
      this.say(`Forgotten. The marker is [forgotten ${report.tombstoneId}]; the field was emptied, the text is kept nowhere on this page.`);
      await Promise.all([this.tombstones.refresh(), this.onApplied(report)]);
    } catch (err) {
      this.say(refusal(err, "Forget", body.shared), true);
    } finally {
      this.busy(false);
    }
  }
}

// The Forget section of `agentId`'s Memory page; `onApplied(report)` is awaited after an apply.
export function forgetSection(agentId, writable, onApplied) {
  const section = el("section", { className: "forget", id: "forget" }, el("h3", {}, "Forget…"));
  let tombstones;
  if (writable) {
    const box = new ForgetBox(agentId, onApplied);
    section.append(el("p", { className: "muted" }, "Replace a text everywhere the suite keeps it (the agent's files, its dreams'",
      " records and backups, its archive; the shared vault when asked) with a marker, and keep it from coming back."),
    box.form, box.confirm, box.status, box.report);
    tombstones = box.tombstones;
  } else {
    tombstones = new Tombstones(agentId);
  }
  section.append(tombstones.root);
  tombstones.refresh();
  return section;
}
