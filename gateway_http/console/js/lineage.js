// An agent's Lineage page (docs/concepts/lineage.md): for each live session, which revision of each
// identity file built the CLAUDE.md it runs on, whether today's file differs and the diff, then the
// compositions kept. One GET .../lineage per refresh; every hash, origin and diff line is text.

import { pageLinks } from "./agents.js";
import { agentPath, ApiError, call } from "./api.js";
import { append, clear, el } from "./dom.js";
import { ago } from "./format.js";

export const REFRESH_MS = 3000;
const MISSING = "ORIGIN_KIND_MISSING";

// Each showLineage() call takes a number; a refresh loop whose number is not the newest stops.
let shown = 0;

// "YYYY-MM-DD hh:mm:ss UTC" from milliseconds since the epoch, as the watcher words a PUT's time.
function at(ms) {
  const n = Number(ms || 0);
  return n ? `${new Date(n).toISOString().slice(0, 19).replace("T", " ")} UTC` : "an unknown time";
}

function short(sha) {
  return sha ? sha.slice(0, 12) : "none";
}

function origin(revision) {
  const o = (revision && revision.origin) || {};
  return o.kind === MISSING || !(revision && revision.sha256) ? "missing" : (o.description || "an unknown revision");
}

// "runs on MEMORY.md as of PUT at T" (or "runs without MEMORY.md" when it was missing then).
function runsOn(source) {
  const o = (source.revision && source.revision.origin) || {};
  if (o.kind === MISSING || !(source.revision && source.revision.sha256)) return `runs without ${source.name} (missing)`;
  return `runs on ${source.name} as of ${origin(source.revision)}`;
}

function diffLine(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return el("div", { className: "meta" }, line);
  if (line.startsWith("@@")) return el("div", { className: "hunk" }, line);
  if (line.startsWith("+")) return el("div", { className: "ins" }, line);
  if (line.startsWith("-")) return el("div", { className: "del" }, line);
  return el("div", {}, line);
}

function diffBlock(source) {
  if (source.diffUnavailable) return el("p", { className: "muted diff-unavailable" }, "no diff: ", source.diffUnavailable);
  if (!source.diff) return null;
  const lines = source.diff.replace(/\n$/, "").split("\n");
  return el("div", {}, el("div", { className: "diff" }, lines.map(diffLine)),
    source.diffTruncated ? el("p", { className: "muted diff-truncated" }, "the diff is cut here (16,000 characters)") : null);
}

function sourceItem(source) {
  const item = el("li", { className: source.differs ? "source differs" : "source" },
    el("div", {}, el("span", { className: "runs-on" }, runsOn(source)), " ",
      source.revision && source.revision.sha256
        ? el("code", { className: "muted", title: "SHA-256 of the session's revision" }, short(source.revision.sha256)) : null),
    source.differs
      ? el("div", { className: "today over" }, "differs from today's file: ", origin(source.today))
      : el("div", { className: "today muted" }, "same as today"),
    source.differs ? diffBlock(source) : null);
  item.dataset.file = source.name;
  return item;
}

function sessionArticle(session) {
  const busy = session.state === "SESSION_STATE_BUSY";
  const composition = session.composition;
  const sources = session.sources || [];
  const changed = sources.filter((s) => s.differs).length;
  const article = el("article", { className: "lineage-session" },
    el("h3", {}, "Session ", el("code", {}, session.sessionId), " ",
      el("span", { className: busy ? "state-busy" : "state-idle" }, busy ? "busy" : "idle")),
    composition
      ? el("p", { className: "muted" }, `CLAUDE.md of composition #${composition.id}, composed ${at(composition.composedAtMs)} `,
        `(${ago(composition.composedAtMs)}), SHA-256 `, el("code", {}, short(composition.claudeMdSha256)),
        changed ? ` · ${changed} file${changed === 1 ? "" : "s"} changed since` : " · up to date")
      : el("p", { className: "muted" }, "registered before the agent's first recorded composition: its sources are not known"),
    sources.length ? el("ul", { className: "sources" }, sources.map(sourceItem)) : null);
  article.dataset.session = session.sessionId;
  return article;
}

function compositionRow(composition, sessions) {
  const tied = sessions.filter((s) => s.composition && s.composition.id === composition.id).map((s) => s.sessionId);
  const row = el("tr", {},
    el("td", {}, `#${composition.id}`),
    el("td", {}, at(composition.composedAtMs)),
    el("td", {}, el("code", { title: composition.claudeMdSha256 || "" }, short(composition.claudeMdSha256))),
    el("td", {}, (composition.sources || []).map((s) => el("div", {}, `${s.name}: ${origin(s)}`))),
    el("td", {}, tied.length ? tied.map((id) => el("div", { className: "session" }, id)) : el("span", { className: "muted" }, "none")));
  row.dataset.composition = String(composition.id);
  return row;
}

function compositionsTable(lineage) {
  const compositions = lineage.compositions || [];
  const sessions = lineage.sessions || [];
  if (!compositions.length) return el("p", { className: "muted" }, "none recorded yet");
  return el("table", { id: "lineage-compositions" },
    el("thead", {}, el("tr", {}, ["Composition", "Composed", "CLAUDE.md", "Sources", "Sessions on it"].map((h) => el("th", {}, h)))),
    el("tbody", {}, compositions.map((c) => compositionRow(c, sessions))));
}

function draw(body, lineage) {
  const sessions = lineage.sessions || [];
  clear(body);
  append(body, [
    el("h3", {}, `Live sessions (${sessions.length})`),
    sessions.length ? sessions.map(sessionArticle) : el("p", { className: "muted" }, "no live session"),
    el("h3", {}, `Recent compositions (${(lineage.compositions || []).length})`),
    compositionsTable(lineage),
  ]);
}

// Fill `root` with the Lineage page of `agentId` and refresh it every REFRESH_MS while it is shown.
export async function showLineage(root, agentId) {
  const mine = ++shown;
  const hash = window.location.hash;
  const status = el("p", { className: "muted", id: "lineage-status" });
  status.setAttribute("role", "status");
  const body = el("div", { id: "lineage-body" });
  clear(root);
  append(root, [
    el("h2", {}, "Lineage of ", el("span", { className: "agent-name" }, agentId)),
    pageLinks(agentId, "lineage"),
    el("p", { className: "hint" }, "Which revision of each identity file built the CLAUDE.md each live session runs on, ",
      "and what changed in the files since."),
    status, body,
  ]);
  const current = () => mine === shown && window.location.hash === hash && !root.hidden;

  async function refresh() {
    const lineage = await call("GET", agentPath(agentId, "/lineage"));
    if (!current()) return;
    draw(body, lineage);
    status.textContent = `as of ${new Date().toISOString().slice(11, 19)} UTC, refreshed every ${REFRESH_MS / 1000} s`;
    root.dataset.refreshed = String(Date.now());
  }

  async function tick() {
    if (!current()) return;
    try {
      await refresh();
    } catch (err) {
      status.textContent = `refresh failed: ${err.message}`;
      if (err instanceof ApiError && err.status === 401) return;
    }
    setTimeout(tick, REFRESH_MS);
  }

  await refresh();
  setTimeout(tick, REFRESH_MS);
}
