// An agent's Shared vault page: the vault's notes with who wrote them and their retirement, the
// graph reports as lists that open the notes they name, and the link graph drawn as an SVG.
// Below the notes, the vault's weekly reflection (vault_reflection.js).
// Note names, titles, bodies and findings are untrusted: they only ever become text nodes.

import { pageLinks } from "./agents.js";
import { agentPath, call } from "./api.js";
import { append, clear, el } from "./dom.js";
import { when } from "./format.js";
import { reflectionSection } from "./vault_reflection.js";

const SVG = "http://www.w3.org/2000/svg";
const SIZE = 640;
const MARGIN = 30;
const GRAVITY = 1;
const FORCE_LIMIT = 300; // above this many nodes the circle layout is kept as it is
const LABEL_CHARS = 40;
const REPORTS = [
  ["contradictions", "Contradictions"],
  ["dangling", "Dangling links"],
  ["stale", "Stale notes"],
  ["lowConfidence", "Low confidence"],
  ["problems", "Problems"],
];

// An SVG element; attribute names come from this file only, never from the data.
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return append(node, children);
}

function seconds(s) {
  return s ? when(new Date(Number(s) * 1000).toISOString()) : "";
}

function writer(w) {
  if (!w) return el("span", { className: "muted" }, "not recorded");
  const how = w.runId ? `dream run ${w.runId}` : `key ${w.key || "unknown"}`;
  return el("span", {}, w.agentId, el("span", { className: "muted" }, ` (${how}) ${seconds(w.at)}`));
}

function kib(n) {
  const bytes = Number(n || 0);
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KB`;
}

// Circle layout, then rounds of a plain force layout (Fruchterman-Reingold: nodes push apart,
// links pull together, a pull to the centre keeps loose notes in view; each move capped
// by a cooling step) for graphs small enough to compute it quickly. Same graph, same picture.
export function layout(nodes, edges) {
  const n = nodes.length;
  const centre = SIZE / 2;
  const radius = centre - MARGIN;
  const at = new Map(nodes.map((node, i) => [node.name, {
    x: centre + radius * Math.cos((2 * Math.PI * i) / Math.max(n, 1)),
    y: centre + radius * Math.sin((2 * Math.PI * i) / Math.max(n, 1)),
  }]));
  if (n < 2 || n > FORCE_LIMIT) return at;
  const points = [...at.values()];
  const index = new Map([...at.keys()].map((name, i) => [name, i]));
  const ideal = Math.min(120, (SIZE * 0.5) / Math.sqrt(n));
  const rounds = 80;
  for (let round = 0; round < rounds; round += 1) {
    const moves = points.map((p) => ({ x: (centre - p.x) * GRAVITY, y: (centre - p.y) * GRAVITY }));
    for (let i = 0; i < n; i += 1) {
      for (let j = i + 1; j < n; j += 1) {
        const dx = points[i].x - points[j].x;
        const dy = points[i].y - points[j].y;
        const push = (ideal * ideal) / Math.max(dx * dx + dy * dy, 1);
        moves[i].x += dx * push; moves[i].y += dy * push;
        moves[j].x -= dx * push; moves[j].y -= dy * push;
      }
    }
    for (const edge of edges) {
      const i = index.get(edge.fromName);
      const j = index.get(edge.toName);
      if (i === undefined || j === undefined) continue;
      const dx = points[j].x - points[i].x;
      const dy = points[j].y - points[i].y;
      const pull = Math.sqrt(dx * dx + dy * dy) / ideal;
      moves[i].x += dx * pull; moves[i].y += dy * pull;
      moves[j].x -= dx * pull; moves[j].y -= dy * pull;
    }
    const cap = (SIZE / 10) * (1 - round / rounds) + 1;
    points.forEach((p, i) => {
      const length = Math.max(Math.hypot(moves[i].x, moves[i].y), 1e-9);
      const step = Math.min(length, cap) / length;
      p.x = Math.min(SIZE - MARGIN, Math.max(MARGIN, p.x + moves[i].x * step));
      p.y = Math.min(SIZE - MARGIN, Math.max(MARGIN, p.y + moves[i].y * step));
    });
  }
  return at;
}

// A node's name beside its circle, on the side away from the nearer edge, cut to LABEL_CHARS.
function label(p, name) {
  const right = p.x > SIZE / 2;
  const shown = name.length > LABEL_CHARS ? `${name.slice(0, LABEL_CHARS - 1)}…` : name;
  return svg("text", { x: (p.x + (right ? -9 : 9)).toFixed(1), y: (p.y + 4).toFixed(1), "text-anchor": right ? "end" : "start" }, shown);
}

class VaultPage {
  constructor(root, agentId, writable) {
    this.root = root;
    this.agentId = agentId;
    this.reflection = reflectionSection(agentId, writable, () => Promise.all([this.listNotes(true), this.loadGraph()]),
      (name) => this.noteLink(name));
    this.project = "";
    this.message = el("p", { id: "vault-message", className: "muted" });
    this.message.setAttribute("role", "status");
    this.retired = el("input", { type: "checkbox", id: "vault-retired" });
    this.rows = el("tbody", { id: "vault-rows" });
    this.more = el("button", { type: "button", id: "vault-more", hidden: true }, "More notes");
    this.note = el("section", { id: "vault-note", hidden: true });
    this.reports = el("section", { id: "vault-reports" });
    this.graph = el("section", { id: "vault-graph" });
    this.token = "";
  }

  say(text, bad = false) {
    this.message.className = bad ? "error" : "muted";
    this.message.textContent = text;
  }

  noteLink(name, missing = false) {
    const link = el("button", { type: "button", className: missing ? "note-link missing" : "note-link" }, name);
    link.dataset.note = name;
    link.addEventListener("click", () => this.open(name));
    return link;
  }

  async show() {
    clear(this.root);
    this.retired.addEventListener("change", () => this.listNotes(true));
    this.more.addEventListener("click", () => this.listNotes(false));
    append(this.root, [
      el("h2", {}, "Shared vault of ", el("span", { className: "agent-name" }, this.agentId)),
      pageLinks(this.agentId, "vault"),
      this.message, this.note,
      el("section", { id: "vault-notes" },
        el("h3", {}, "Notes ", el("span", { id: "vault-total", className: "muted" })),
        el("label", {}, this.retired, " show retired notes"),
        el("table", { id: "vault-table" },
          el("thead", {}, el("tr", {}, ["Note", "Title", "Provenance", "Created by", "Last changed by", "Updated", "Size", "State"]
            .map((h) => el("th", {}, h)))),
          this.rows),
        this.more),
      this.reflection.root, this.reports, this.graph,
    ]);
    await Promise.all([this.listNotes(true).then(() => this.reflection.show(this.project)), this.loadGraph()]);
  }

  async listNotes(fresh) {
    if (fresh) {
      this.token = "";
      clear(this.rows);
    }
    const query = new URLSearchParams({ pageSize: "100", includeRetired: String(this.retired.checked) });
    if (this.token) query.set("pageToken", this.token);
    try {
      const page = await call("GET", `${agentPath(this.agentId, "/shared/notes")}?${query}`);
      this.rows.append(...(page.notes || []).map((note) => this.noteRow(note)));
      document.getElementById("vault-total").textContent = `(${Number(page.total || 0)})`;
      this.token = page.nextPageToken || "";
      this.project = page.project || "";
      this.more.hidden = !this.token;
    } catch (err) {
      this.say(`cannot list the notes: ${err.message}`, true);
    }
  }

  noteRow(note) {
    const state = note.retired
      ? el("span", { className: "retired" }, "retired", el("span", { className: "muted" },
        ` ${seconds(note.retiredAt)}${note.retiredReason ? `: ${note.retiredReason}` : ""}`))
      : el("span", { className: "muted" }, "live");
    const row = el("tr", { className: note.retired ? "note-retired" : "" },
      el("td", {}, this.noteLink(note.name)), el("td", {}, note.title || ""),
      el("td", {}, note.provenance || ""), el("td", {}, writer(note.created)), el("td", {}, writer(note.changed)),
      el("td", {}, seconds(note.updatedAt)), el("td", {}, kib(note.sizeBytes)), el("td", {}, state));
    row.dataset.note = note.name;
    return row;
  }

  async open(name) {
    clear(this.note);
    this.note.hidden = false;
    const close = el("button", { type: "button", id: "vault-note-close" }, "Close");
    close.addEventListener("click", () => { this.note.hidden = true; });
    this.note.append(el("h3", {}, "Note ", el("span", { id: "vault-note-name" }, name), " ", close));
    try {
      const note = await call("GET", agentPath(this.agentId, `/shared/notes/${encodeURIComponent(name)}`));
      append(this.note, [note.retired ? el("p", { className: "retired" }, "retired") : null,
        el("pre", { className: "file-text", id: "vault-note-text" }, note.content || "")]);
    } catch (err) {
      this.note.append(el("p", { className: "error", id: "vault-note-error" }, err.message));
    }
    this.note.scrollIntoView({ block: "start" });
  }

  async loadGraph() {
    try {
      const graph = await call("GET", agentPath(this.agentId, "/shared/graph"));
      this.showReports(graph);
      this.showGraph(graph);
    } catch (err) {
      this.say(`cannot read the vault's graph: ${err.message}`, true);
    }
  }

  showReports(graph) {
    clear(this.reports);
    this.reports.append(el("h3", {}, "Reports"));
    if (graph.truncated) this.reports.append(el("p", { className: "muted" }, `cut to size: ${graph.message}`));
    for (const [field, title] of REPORTS) {
      const found = graph[field] || [];
      const list = el("ul", { className: "findings" }, found.map((f) => el("li", { className: "finding" },
        (f.notes || []).flatMap((name, i) => [i ? ", " : null, this.noteLink(name)]), ": ", f.text)));
      const part = el("section", { className: "report" }, el("h4", {}, `${title} (${found.length})`),
        found.length ? list : el("p", { className: "muted" }, "none"));
      part.id = `vault-report-${field}`;
      this.reports.append(part);
    }
  }

  showGraph(graph) {
    const nodes = graph.nodes || [];
    const edges = graph.edges || [];
    const at = layout(nodes, edges);
    const lines = edges.filter((e) => at.has(e.fromName) && at.has(e.toName)).map((e) => {
      const a = at.get(e.fromName);
      const b = at.get(e.toName);
      return svg("line", { x1: a.x.toFixed(1), y1: a.y.toFixed(1), x2: b.x.toFixed(1), y2: b.y.toFixed(1), class: "edge" },
        svg("title", {}, `${e.fromName} → ${e.toName}`));
    });
    const dots = nodes.map((node) => {
      const p = at.get(node.name);
      const kind = node.missing ? "node missing" : node.retired ? "node retired" : "node";
      const group = svg("g", { class: kind, tabindex: 0 },
        svg("circle", { cx: p.x.toFixed(1), cy: p.y.toFixed(1), r: 6 }),
        label(p, node.name),
        svg("title", {}, node.title ? `${node.name}: ${node.title}` : node.name));
      group.dataset.note = node.name;
      group.addEventListener("click", () => this.open(node.name));
      return group;
    });
    clear(this.graph);
    append(this.graph, [
      el("h3", {}, `Link graph (${nodes.length} notes, ${edges.length} links)`),
      el("p", { className: "muted" }, "click a note to read it; hollow: a missing note a link points at; grey: retired"),
      svg("svg", { id: "vault-svg", viewBox: `0 0 ${SIZE} ${SIZE}`, width: SIZE, height: SIZE, role: "img" },
        svg("g", { class: "edges" }, lines), svg("g", { class: "nodes" }, dots)),
    ]);
  }
}

export async function showVault(root, agentId, writable) {
  await new VaultPage(root, agentId, writable).show();
}
