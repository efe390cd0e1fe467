// An agent's Memory page: its identity files (edit and save with a write key) and a search
// over its archive. File text, snippets and paths are rendered as text only.

import { agentPath, call } from "./api.js";
import { agentHref } from "./agents.js";
import { append, clear, el } from "./dom.js";

export const FILES = ["MEMORY.md", "USER.md", "SOUL.md", "IDENTITY.md", "AGENTS.md", "HEARTBEAT.md"];

function filePath(agentId, name) {
  return agentPath(agentId, `/files/${encodeURIComponent(name)}`);
}

// Save `text` unless the file changed since `loaded` was read: the file API writes whole files,
// so the page reads the file again first and reports a change instead of overwriting it.
async function save(agentId, name, loaded, text) {
  const now = await call("GET", filePath(agentId, name));
  if ((now.content || "") !== loaded.content) {
    return { conflict: true, content: now.content || "" };
  }
  const reply = await call("PUT", filePath(agentId, name), { body: { content: text } });
  loaded.content = text;
  return { conflict: false, message: reply.message || "saved" };
}

function fileSection(agentId, name, content, writable) {
  const loaded = { content };
  const status = el("p", { className: "muted file-status" });
  const section = el("section", { className: "file" }, el("h3", {}, name));
  section.dataset.file = name;
  if (!writable) {
    section.append(el("pre", { className: "file-text" }, content || "(empty)"), status);
    return section;
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
        section.append(el("pre", { className: "file-text conflict" }, result.content));
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
  return section;
}

function hitItem(hit) {
  const lines = hit.startLine ? `:${hit.startLine}-${hit.endLine}` : "";
  return el("li", { className: "hit" },
    el("div", {}, el("code", {}, `${hit.path}${lines}`), " ",
      el("span", { className: "muted" }, `${hit.provenance || "unknown"} · score ${hit.score}`)),
    el("pre", { className: "snippet" }, hit.snippet || ""));
}

function searchForm(agentId) {
  const input = el("input", { type: "search", id: "search-query" });
  input.placeholder = "words to find in the archive";
  const results = el("ol", { className: "hits", id: "search-hits" });
  const status = el("p", { className: "muted", id: "search-status" });
  const form = el("form", { id: "search-form" }, input, el("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clear(results);
    status.textContent = "searching…";
    try {
      const query = new URLSearchParams({ query: input.value });
      const reply = await call("GET", `${agentPath(agentId, "/memory:search")}?${query}`);
      const hits = reply.hits || [];
      status.textContent = `${hits.length} hit${hits.length === 1 ? "" : "s"}${reply.stale ? " (the index is catching up)" : ""}`;
      results.append(...hits.map(hitItem));
    } catch (err) {
      status.textContent = `search failed: ${err.message}`;
    }
  });
  return el("section", { className: "search" }, el("h3", {}, "Search the archive"), form, status, results);
}

// Fill `root` with the Memory page of `agentId`.
export async function showMemory(root, agentId, writable) {
  clear(root);
  append(root, [el("h2", {}, "Memory of ", el("span", { className: "agent-name" }, agentId)),
    el("p", {}, el("a", { href: "#/agents" }, "all agents"), " · ", el("a", { href: agentHref(agentId, "dreams") }, "dreams")),
    writable ? null : el("p", { className: "read-only" }, "read only: this key cannot write to this agent")]);
  const files = await Promise.all(FILES.map(async (name) => {
    try {
      return fileSection(agentId, name, (await call("GET", filePath(agentId, name))).content || "", writable);
    } catch (err) {
      return el("section", { className: "file" }, el("h3", {}, name), el("p", { className: "error" }, err.message));
    }
  }));
  root.append(searchForm(agentId), ...files);
}
