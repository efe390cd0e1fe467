// The Agents page: one row per agent the key may see, from one GET /api/v1/agents per refresh.

import { agentPath, ApiError, call } from "./api.js";
import { clear, el, setText } from "./dom.js";
import { ago, chars, when } from "./format.js";

export const REFRESH_MS = 2500;

// The last list answered, by agent id (the Memory page reads whether the key may write).
export const known = new Map();

export async function listAgents() {
  const data = await call("GET", "/api/v1/agents");
  const agents = data.agents || [];
  known.clear();
  for (const agent of agents) known.set(agent.agentId, agent);
  return agents;
}

export function agentHref(agentId, page) {
  return `#/agents/${encodeURIComponent(agentId)}/${page}`;
}

// The pages of one agent, in the order their links are shown.
export const AGENT_PAGE_NAMES = ["memory", "dreams", "vault", "lineage"];

// The links from one agent's page to the list and to the agent's other pages.
export function pageLinks(agentId, current) {
  const links = [el("a", { href: "#/agents" }, "all agents")];
  for (const page of AGENT_PAGE_NAMES) {
    if (page !== current) links.push(" · ", el("a", { href: agentHref(agentId, page) }, page));
  }
  return el("p", { className: "page-links" }, links);
}

function budgetLine(file) {
  const budget = Number(file.budget || 0);
  const size = Number(file.chars || 0);
  const meter = el("meter", { min: 0, max: budget || Math.max(size, 1), value: size, title: `${file.name} size` });
  if (budget) {
    meter.low = Math.round(budget * 0.75);
    meter.high = Math.round(budget * 0.9);
    meter.optimum = 0;
  }
  meter.dataset.file = file.name;
  const label = file.present ? `${chars(size)} / ${budget ? chars(budget) : "no budget"}` : "missing";
  return el("div", { className: "budget" },
    el("span", {}, file.name),
    meter,
    el("span", { className: file.overBudget ? "over" : "" }, label, file.overBudget ? " over budget" : ""));
}

function sessionsCell(agent) {
  const sessions = agent.sessions || [];
  if (!sessions.length) {
    return el("td", { className: "muted" }, "none");
  }
  return el("td", {}, sessions.map((s) => {
    const busy = s.state === "SESSION_STATE_BUSY";
    return el("div", { className: "session" },
      el("span", { className: busy ? "state-busy" : "state-idle" }, busy ? "busy " : "idle "), s.sessionId);
  }));
}

function lastDream(dream) {
  if (!dream.known) {
    return el("td", { className: "muted", title: dream.reason }, "unknown: ", dream.reason);
  }
  if (!dream.lastRunId) {
    return el("td", { className: "muted" }, "never");
  }
  return el("td", {},
    el("div", {}, dream.lastStatus, " ", when(dream.lastRunAt)),
    opCounts(dream),
    dream.lastReason ? el("div", { className: "muted" }, dream.lastReason) : null);
}

// "2 applied · 1 skipped" (and proposed, for a propose run or when any was).
function opCounts(dream) {
  const proposed = Number(dream.opsProposed || 0);
  const parts = [`${Number(dream.opsApplied || 0)} applied`, `${Number(dream.opsSkipped || 0)} skipped`];
  if (proposed || dream.mode === "propose") parts.push(`${proposed} proposed`);
  return el("div", { className: "op-counts" }, parts.join(" · "));
}

const SHOWN_REASON = 90;

// A reason cut to SHOWN_REASON characters; the whole of it in the title.
function reasonLine(className, head, reason) {
  const cut = reason.length > SHOWN_REASON ? `${reason.slice(0, SHOWN_REASON - 1)}…` : reason;
  return el("div", { className, title: reason }, head, cut);
}

// The run-health line: failed runs of the last 7 days (the last one's reason), then the shared vault.
function healthCell(dream) {
  if (!dream.known) return el("td", { className: "muted" }, "");
  const failures = Number(dream.failuresLast7Days || 0);
  const promoted = Number(dream.promoted || 0);
  const cell = el("td", { className: "health" },
    failures
      ? reasonLine("health-failures", `${failures} failed in 7 days, last ${ago(Date.parse(dream.lastFailureAt))}: `,
        dream.lastFailureReason || "")
      : el("div", { className: "health-ok" }, "no failures in 7 days"));
  if (promoted) {
    cell.append(el("div", { className: "promoted" }, `${promoted} promoted to the shared vault`));
  } else if (dream.lastRunId && dream.notPromoted) {
    cell.append(reasonLine("not-promoted muted", "nothing promoted: ", dream.notPromoted));
  }
  return cell;
}

function nextRun(dream) {
  if (!dream.known) return el("td", { className: "muted" }, "");
  if (!dream.scheduled) return el("td", { className: "muted" }, "not scheduled");
  return el("td", {}, when(dream.nextRunAt), el("div", { className: "muted" }, dream.mode));
}

function actions(agent, onRun) {
  if (!agent.writable) {
    return el("td", { className: "read-only" }, "read only");
  }
  const run = el("button", { type: "button", className: "run-now" }, "Dream now (propose)");
  run.addEventListener("click", () => onRun(agent.agentId, run));
  return el("td", {}, run);
}

export function agentRow(agent, onRun) {
  const dream = agent.dream || {};
  const row = el("tr", {},
    el("td", {}, el("a", { className: "agent-id", href: agentHref(agent.agentId, "memory"), title: "memory" }, agent.agentId),
      el("span", { className: "page-links" }, AGENT_PAGE_NAMES.slice(1).map((page) =>
        el("a", { className: `${page}-link`, href: agentHref(agent.agentId, page) }, page))),
      agent.overBudget ? el("span", { className: "flag" }, "OVER BUDGET") : null),
    el("td", {}, (agent.files || []).map(budgetLine)),
    sessionsCell(agent),
    el("td", {}, ago(agent.lastActivityMs)),
    lastDream(dream),
    healthCell(dream),
    nextRun(dream),
    el("td", {}, dream.known ? String(dream.pendingProposals || 0) : ""),
    actions(agent, onRun));
  row.dataset.agent = agent.agentId;
  return row;
}

async function runNow(agentId, button) {
  button.disabled = true;
  setText("agents-status", `dreaming ${agentId} in propose mode…`);
  try {
    const report = await call("POST", agentPath(agentId, "/dream:run"), { body: { mode: "propose" } });
    setText("agents-status", `${agentId}: ${report.status}${report.reason ? `: ${report.reason}` : ""}`);
  } catch (err) {
    setText("agents-status", `${agentId}: ${err.message}`);
  } finally {
    button.disabled = false;
  }
}

// Polls the list until stop() is called; onUnauthorized() when the key stops being accepted.
export function startAgents(onUnauthorized) {
  let timer = null;
  let stopped = false;
  const rows = document.getElementById("agents-rows");

  async function refresh() {
    try {
      const agents = await listAgents();
      if (stopped) return;
      clear(rows);
      rows.append(...agents.map((a) => agentRow(a, runNow)));
      setText("agents-count", `(${agents.length})`);
      document.getElementById("agents").dataset.refreshed = String(Date.now());
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        onUnauthorized(err.message);
        return;
      }
      setText("agents-status", `refresh failed: ${err.message}`);
    }
    if (!stopped) {
      timer = setTimeout(refresh, REFRESH_MS);
    }
  }

  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
