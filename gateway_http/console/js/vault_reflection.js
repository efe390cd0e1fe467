// The vault's weekly reflection on the Shared vault page: its runs newest first (GET reflection:runs)
// with each cluster's outcome and reason, the proposals of a propose-mode run with the diff of each
// note it replaces into the merged note, and for a write key Run reflection now, Accept / Reject of a
// pending proposal and Revert this run, each write asked again in the page first. The calls work on
// the whole vault, so they need a key whose scope is every agent ("*"): any other key is told so.
// Note names, contents and reasons come from agents and the reviewer: they only ever become text nodes.

import { agentPath, ApiError, call } from "./api.js";
import { clear, el } from "./dom.js";
import { diffView } from "./dreams_diff.js";
import { when } from "./format.js";

const RUNS = 20;
const OUTCOMES = ["merged", "proposed", "left", "refused", "changed", "unreviewed"];
const SCOPE_NEEDED = "The weekly reflection works on the whole shared vault, which every agent of the project reads: "
  + "running it, listing its runs and deciding its proposals need a key whose scope is every agent (\"*\"). "
  + "This key is scoped to some agents only, so the reflection is not shown here; the notes above are.";

// Unix epoch seconds (a double) as the console shows a time; "" for none.
function at(seconds) {
  const s = Number(seconds || 0);
  return s ? when(new Date(s * 1000).toISOString()) : "";
}

function button(text, props, onClick) {
  const node = el("button", { type: "button", ...props }, text);
  node.addEventListener("click", onClick);
  return node;
}

// "3 clusters seen: 1 merged, 2 left · 4 remaining for the next run", from the run's clusters.
export function counts(run) {
  const clusters = run.clusters || [];
  const by = OUTCOMES.map((o) => [o, clusters.filter((c) => c.outcome === o).length]).filter(([, n]) => n);
  const parts = by.map(([o, n]) => `${n} ${o}`).join(", ");
  const remaining = Number(run.remaining || 0);
  return `${clusters.length} cluster${clusters.length === 1 ? "" : "s"} seen${parts ? `: ${parts}` : ""}`
    + `${remaining ? ` · ${remaining} remaining for the next run` : ""}`;
}

class Reflection {
  constructor(agentId, writable, onWritten, noteLink) {
    this.agentId = agentId;
    this.writable = writable;
    this.onWritten = onWritten;
    this.noteLink = noteLink;
    this.project = "";
    this.root = el("section", { id: "reflection" });
    this.message = el("p", { id: "reflection-message", className: "muted" });
    this.message.setAttribute("role", "status");
    this.confirm = el("div", { id: "reflection-confirm", className: "confirm", hidden: true });
    this.runs = el("div", { id: "reflection-runs", className: "runs" });
    this.mode = el("select", { id: "reflection-mode", title: "mode of the run" },
      el("option", { value: "propose" }, "propose"), el("option", { value: "auto" }, "auto"));
    this.contents = new Map(); // note name -> its content now, read once per listing
  }

  // Note names as links that open the note on the page (a name stays a text node inside them).
  names(list) {
    return (list || []).flatMap((name, i) => [i ? ", " : null, el("q", { className: "note-name" }, this.noteLink(name))]);
  }

  say(text, bad = false) {
    this.message.className = bad ? "error" : "muted";
    this.message.textContent = text;
  }

  path(rest) {
    return `/api/v1/vaults/${encodeURIComponent(this.project)}/reflection:${rest}`;
  }

  // Ask before a write: `lines` shown with Yes (runs `work`) and Cancel.
  ask(lines, yesText, work) {
    clear(this.confirm);
    const yes = button(yesText, { id: "reflection-yes" }, () => {
      this.confirm.hidden = true;
      work();
    });
    const no = button("Cancel", { id: "reflection-no" }, () => {
      this.confirm.hidden = true;
      clear(this.confirm);
    });
    this.confirm.append(...lines.map((line) => el("p", {}, line)), el("div", { className: "op-controls" }, yes, no));
    this.confirm.hidden = false;
  }

  // Run `work` with the section's buttons disabled, a refusal shown as the suite words it, then list
  // the runs (and the page's notes) again; the section's data-busy attribute is there until all of it is done.
  async act(label, work) {
    this.root.dataset.busy = "yes";
    this.say(`${label}…`);
    const controls = [this.mode, ...this.root.querySelectorAll("button")];
    for (const b of controls) b.disabled = true;
    try {
      this.say(await work());
    } catch (err) {
      this.say(`${label}: refused: ${err.message}`, true);
    }
    await Promise.all([this.list(), this.onWritten()]);
    for (const b of controls) b.disabled = false;
    delete this.root.dataset.busy;
  }

  async show(project) {
    this.project = project;
    clear(this.root);
    this.root.append(el("h3", {}, "Weekly reflection of vault ", el("code", { id: "reflection-project" }, project || "(none)")));
    if (!project) {
      this.root.append(el("p", { className: "muted" }, "this agent has no shared vault"));
      return;
    }
    const run = button("Run reflection now", { id: "reflection-run" }, () => this.runNow());
    const controls = this.writable
      ? el("div", { className: "op-controls", id: "reflection-controls" }, this.mode, " ", run,
        el("span", { className: "muted" }, " propose: records the merges for you to accept; auto: merges through the guards"))
      : el("p", { className: "read-only" }, "read only: this key cannot run, accept, reject or revert");
    this.root.append(controls, this.message, this.confirm, this.runs);
    await this.list();
  }

  runNow() {
    const mode = this.mode.value;
    const go = () => this.act(`reflecting in ${mode} mode`, async () => {
      const reply = await call("POST", this.path("run"), { body: { mode } });
      return `run ${reply.runId}: ${reply.status}${reply.reason ? ` (${reply.reason})` : ""}, ${counts(reply)}`;
    });
    if (mode === "propose") go();
    else this.ask([`Run the reflection of vault ${this.project} in auto mode? The merges the reviewer wants and the guards pass are written now (each can be reverted).`], "Yes, run and merge", go);
  }

  async list() {
    try {
      const reply = await call("GET", `${this.path("runs")}?limit=${RUNS}`);
      await this.showRuns(reply.runs || []);
    } catch (err) {
      clear(this.runs);
      if (err instanceof ApiError && err.status === 403) {
        this.root.querySelector("#reflection-controls")?.remove();
        this.runs.append(el("p", { id: "reflection-scope", className: "read-only" }, SCOPE_NEEDED));
      } else {
        this.runs.append(el("p", { className: "error" }, `cannot list the reflection's runs: ${err.message}`));
      }
    }
  }

  async showRuns(runs) {
    this.contents.clear();
    const pending = runs.flatMap((r) => (r.proposals || []).filter((p) => p.state === "pending").flatMap((p) => p.replaces || []));
    await Promise.all([...new Set(pending)].map(async (name) => {
      try {
        const note = await call("GET", agentPath(this.agentId, `/shared/notes/${encodeURIComponent(name)}`));
        this.contents.set(name, note.content || "");
      } catch {
        this.contents.set(name, null); // shown as unreadable; an accept will say why
      }
    }));
    clear(this.runs);
    this.runs.append(el("h4", {}, `Runs (${runs.length}, newest first)`));
    if (!runs.length) this.runs.append(el("p", { className: "muted" }, "no run yet"));
    for (const run of runs) this.runs.append(this.runEntry(run));
  }

  runEntry(run) {
    const merged = (run.clusters || []).some((c) => c.outcome === "merged");
    const reverted = Number(run.revertedAt || 0);
    const node = el("article", { className: "run reflection-run" },
      el("h4", {}, el("code", {}, run.runId), ` ${run.trigger}, ${run.mode}: `,
        el("span", { className: `run-status status-${run.status}` }, run.status), ` · ${at(run.startedAt)}`),
      run.reason ? el("p", { className: "run-reason" }, run.reason) : null,
      el("p", { className: "muted run-counts" }, counts(run)),
      reverted ? el("p", { className: "retired run-reverted" }, `reverted at ${at(reverted)}`) : null,
      this.writable && merged && !reverted ? button("Revert this run", { className: "revert-run" }, () => this.revert(run)) : null,
      (run.clusters || []).length ? el("ul", { className: "ops clusters" }, run.clusters.map((c) => this.clusterItem(c))) : null,
      (run.proposals || []).length ? el("ul", { className: "ops proposals" }, run.proposals.map((p) => this.proposalItem(run, p))) : null);
    node.dataset.run = run.runId;
    return node;
  }

  clusterItem(cluster) {
    const node = el("li", { className: `op cluster outcome-${cluster.outcome}` },
      el("div", { className: "op-head" }, el("code", {}, cluster.clusterId), " ", this.names(cluster.notes),
        el("span", { className: `op-status status-${cluster.outcome}` }, ` · ${cluster.outcome}`)),
      cluster.reason ? el("div", { className: "muted cluster-reason" }, cluster.reason) : null,
      cluster.mergeId ? el("div", { className: "muted" }, "merge ", el("code", {}, cluster.mergeId)) : null);
    node.dataset.cluster = cluster.clusterId;
    return node;
  }

  proposalItem(run, p) {
    const pending = p.state === "pending";
    const diffs = pending ? (p.replaces || []).map((name) => {
      const now = this.contents.get(name);
      return now === null || now === undefined
        ? el("div", { className: "diff muted" }, `${name}: cannot be read now`)
        : diffView(now, p.content, `${name} → ${p.name}`);
    }) : [el("details", {}, el("summary", {}, "merged content"), el("pre", { className: "file-text" }, p.content || ""))];
    const controls = this.writable && pending ? el("div", { className: "op-controls" },
      button("Accept", { className: "accept-one" }, () => this.accept(run, p)), " ",
      button("Reject", { className: "reject-one" }, () => this.decide(run, p, "reject"))) : null;
    const node = el("li", { className: `op proposal state-${p.state}` },
      el("div", { className: "op-head" }, "proposal ", el("code", {}, p.clusterId), ": merge ", this.names(p.replaces),
        " into ", el("q", { className: "note-name merged-name" }, p.name),
        el("span", { className: `op-status status-${p.state}` }, ` · ${p.state}`)),
      p.reason ? el("div", { className: "muted" }, "reviewer: ", p.reason) : null,
      diffs, controls);
    node.dataset.cluster = p.clusterId;
    node.dataset.state = p.state;
    return node;
  }

  accept(run, p) {
    const others = (p.replaces || []).filter((n) => n !== p.name);
    this.ask([`Merge ${(p.replaces || []).join(", ")} into ${p.name}?`,
      `${others.length ? `${others.join(", ")} will be retired as stale__<name>; ` : ""}every guard is checked again, and a note changed since the proposal makes it stale with nothing written. The merge can be reverted.`],
    "Yes, merge them", () => this.decide(run, p, "accept"));
  }

  decide(run, p, verb) {
    this.act(`${verb === "accept" ? "accepting" : "rejecting"} ${p.clusterId}`, async () => {
      const body = { runId: run.runId, accept: verb === "accept" ? [p.clusterId] : [], reject: verb === "reject" ? [p.clusterId] : [] };
      const reply = await call("POST", this.path("decide"), { body });
      return `${verb === "accept" ? "accepted" : "rejected"} ${p.clusterId}: run ${reply.runId} ${reply.status}, ${counts(reply)}`;
    });
  }

  revert(run) {
    this.ask([`Revert every merge of run ${run.runId}? Each note still as the run left it gets its bytes from before back, and its name; a note changed since is left as it is and named.`],
      "Yes, revert the run", () => this.act(`reverting ${run.runId}`, async () => {
        const reply = await call("POST", this.path("revert"), { body: { runId: run.runId } });
        const restored = (reply.restored || []).join(", ") || "nothing";
        const left = (reply.left || []).length ? `; left: ${reply.left.join("; ")}` : "";
        return `reverted ${reply.runId}: restored ${restored}${left}`;
      }));
  }
}

// The reflection section of the agent's vault page: `root` to place, `show(project)` to fill it;
// `onWritten()` (a promise) after each write, to read the page's notes again; `noteLink(name)` a
// button that opens the note.
export function reflectionSection(agentId, writable, onWritten, noteLink) {
  return new Reflection(agentId, writable, onWritten, noteLink);
}
