// An agent's Memory page: its identity files (edit and save with a write key), a search over its
// archive, where an entry that left MEMORY.md went, and Forget… (forget.js). File text, snippets
// and paths are rendered as text only.

import { agentPath, ApiError, call } from "./api.js";
import { pageLinks } from "./agents.js";
import { append, clear, el } from "./dom.js";
import { explainForm } from "./explain.js";
import { forgetSection } from "./forget.js";
import { queryForm } from "./query_form.js";

export const FILES = ["MEMORY.md", "USER.md", "SOUL.md", "IDENTITY.md", "AGENTS.md", "HEARTBEAT.md"];

function filePath(agentId, name) {
  return agentPath(agentId, `/files/${encodeURIComponent(name)}`);
}

// Save `text` unless the file changed since `loaded` was read: the PUT carries the sha256 the file
// had then, and the file API writes nothing and answers 409 when it has another now (its
// compare-and-swap, docs/concepts/apis.md). `loaded` then keeps what was written and its hash, and
// the answer's `warnings` (a secret the text now holds, docs/concepts/secrets.md) are shown with it.
async function save(agentId, name, loaded, text) {
  try {
    const reply = await call("PUT", filePath(agentId, name), { body: { content: text, expectedSha256: loaded.sha256 ?? "" } });
    loaded.content = text;
    loaded.sha256 = reply.sha256;
    return { conflict: false, message: reply.message || "saved", warnings: reply.warnings || [] };
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 409) {
      throw err;
    }
    const now = await call("GET", filePath(agentId, name));
    return { conflict: true, content: now.content || "" };
  }
}

function fileSection(agentId, name, file, writable) {
  const content = file.content || "";
  const loaded = { content, sha256: file.sha256 };
  const status = el("p", { className: "muted file-status" });
  const section = el("section", { className: "file" }, el("h3", {}, name));
  section.dataset.file = name;
  if (!writable) {
    section.append(el("pre", { className: "file-text" }, content || "(empty)"), status);
    return { section, status, dirty: () => false };
  }
  const area = el("textarea", { className: "file-text" });
  area.value = content;
  area.rows = Math.min(24, Math.max(4, content.split("\n").length + 1));
  const button = el("button", { type: "button", className: "save" }, "Save");
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.className = "muted file-status";
    status.textContent = "saving…";
    try {
      const result = await save(agentId, name, loaded, area.value);
      if (result.conflict) {
        status.className = "error file-status";
        status.textContent = `Not saved: ${name} changed since you opened it. Its text now is shown below; copy your edit and reload.`;
        section.querySelector("pre.conflict")?.remove();
        section.append(el("pre", { className: "file-text conflict" }, result.content));
      } else if (result.warnings.length) {
        status.className = "error file-status";
        status.textContent = [result.message, ...result.warnings].join(" ");
      } else {
        status.textContent = result.message;
      }
    } catch (err) {
      status.className = "error file-status";
      status.textContent = `Not saved: ${err.message}`;
    } finally {
      button.disabled = false;
    }
  });
  section.append(area, el("div", {}, button), status);
  return { section, status, dirty: () => area.value !== loaded.content };
}

async function loadFile(agentId, name, writable) {
  try {
    return fileSection(agentId, name, await call("GET", filePath(agentId, name)), writable);
  } catch (err) {
    const status = el("p", { className: "error" }, err.message);
    return { section: el("section", { className: "file" }, el("h3", {}, name), status), status, dirty: () => false };
  }
}

// After a forget: each identity file it rewrote is read again (an unsaved edit is kept, and said to
// be behind), and the search and "where did this go?" boxes are emptied: they may show the text.
async function forgotten(root, agentId, writable, shown, report) {
  for (const id of ["search", "explain"]) {
    root.querySelector(`#${id}-query`).value = "";
    root.querySelector(`#${id}-status`).textContent = "";
  }
  clear(root.querySelector("#search-hits"));
  clear(root.querySelector("#explain-entries"));
  const names = new Set((report.places || []).filter((p) => p.store === "workspace" && p.changed).map((p) => p.path));
  await Promise.all(FILES.filter((name) => names.has(name)).map(async (name) => {
    const old = shown.get(name);
    if (old.dirty()) {
      old.status.className = "error file-status";
      old.status.textContent = `The forget rewrote ${name}: your unsaved edit is kept here, and Save will say the file changed. Copy your edit and reload.`;
      return;
    }
    const fresh = await loadFile(agentId, name, writable);
    old.section.replaceWith(fresh.section);
    shown.set(name, fresh);
  }));
}

function hitItem(hit) {
  const lines = hit.startLine ? `:${hit.startLine}-${hit.endLine}` : "";
  return el("li", { className: "hit" },
    el("div", {}, el("code", {}, `${hit.path}${lines}`), " ",
      el("span", { className: "muted" }, `${hit.provenance || "unknown"} · score ${hit.score}`)),
    el("pre", { className: "snippet" }, hit.snippet || ""));
}

function searchForm(agentId) {
  const { form, status, results } = queryForm({
    name: "search", listId: "search-hits", listClass: "hits", placeholder: "words to find in the archive",
    button: "Search", route: agentPath(agentId, "/memory:search"), busy: "searching…", failed: "search failed",
    show: (reply) => {
      const hits = reply.hits || [];
      const status = `${hits.length} hit${hits.length === 1 ? "" : "s"}${reply.stale ? " (the index is catching up)" : ""}`;
      return { status, items: hits.map(hitItem) };
    },
  });
  return el("section", { className: "search" }, el("h3", {}, "Search the archive"), form, status, results);
}

// Fill `root` with the Memory page of `agentId`.
export async function showMemory(root, agentId, writable) {
  clear(root);
  append(root, [el("h2", {}, "Memory of ", el("span", { className: "agent-name" }, agentId)),
    pageLinks(agentId, "memory"),
    writable ? null : el("p", { className: "read-only" }, "read only: this key cannot write to this agent")]);
  const files = await Promise.all(FILES.map((name) => loadFile(agentId, name, writable)));
  const shown = new Map(FILES.map((name, i) => [name, files[i]]));
  const forget = forgetSection(agentId, writable, (report) => forgotten(root, agentId, writable, shown, report));
  root.append(searchForm(agentId), explainForm(agentId), forget, ...files.map((f) => f.section));
}
