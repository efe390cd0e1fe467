// The console's start: sign-in and sign-out, and the pages by the address's #fragment
// (#/agents, #/agents/ID/memory, #/agents/ID/dreams, #/agents/ID/vault, #/agents/ID/lineage).

import { ApiError, call, forgetKey, storedKey, storeKey } from "./api.js";
import { setText, show } from "./dom.js";
import { AGENT_PAGE_NAMES, known, listAgents, startAgents } from "./agents.js";
import { showDreams } from "./dreams.js";
import { showLineage } from "./lineage.js";
import { showMemory } from "./memory.js";
import { showVault } from "./vault.js";

const PAGES = ["agents", ...AGENT_PAGE_NAMES];
const AGENT_PAGE = new RegExp(`^#/agents/([^/]+)/(${AGENT_PAGE_NAMES.join("|")})$`);
const AGENT_PAGES = { memory: showMemory, dreams: showDreams, vault: showVault, lineage: showLineage };
let stopAgents = null;

function stopPolling() {
  if (stopAgents) {
    stopAgents();
    stopAgents = null;
  }
}

function signedOut(message = "") {
  stopPolling();
  forgetKey();
  known.clear();
  show("nav", false);
  for (const page of PAGES) show(page, false);
  show("sign-in", true);
  setText("sign-in-error", message);
  document.getElementById("api-key").value = "";
  document.getElementById("api-key").focus();
}

function onUnauthorized(message) {
  signedOut(`Signed out: ${message}`);
}

async function route() {
  if (!storedKey()) {
    signedOut();
    return;
  }
  show("sign-in", false);
  show("nav", true);
  const page = AGENT_PAGE.exec(window.location.hash);
  stopPolling();
  for (const name of PAGES) show(name, false);
  if (!page) {
    show("agents", true);
    stopAgents = startAgents(onUnauthorized);
    return;
  }
  const agentId = decodeURIComponent(page[1]);
  const root = document.getElementById(page[2]);
  show(page[2], true);
  try {
    if (!known.has(agentId)) await listAgents();
    const agent = known.get(agentId);
    await AGENT_PAGES[page[2]](root, agentId, Boolean(agent && agent.writable));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) onUnauthorized(err.message);
    else root.textContent = `Cannot show ${agentId}: ${err.message}`;
  }
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("api-key");
  const key = input.value.trim();
  setText("sign-in-error", "");
  try {
    await call("GET", "/api/v1/agents", { key });
  } catch (err) {
    const wrong = err instanceof ApiError && err.status === 401;
    setText("sign-in-error", wrong ? `This key was not accepted: ${err.message}` : `Cannot sign in: ${err.message}`);
    return;
  }
  input.value = "";
  storeKey(key);
  route();
}

document.getElementById("sign-in-form").addEventListener("submit", signIn);
document.getElementById("sign-out").addEventListener("click", () => signedOut());
window.addEventListener("hashchange", route);
route();
