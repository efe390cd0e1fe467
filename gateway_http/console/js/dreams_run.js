// Run now (propose or auto) with progress: while the run is in flight the page shows the time it
// has taken and the step the dreaming service says it is at (DreamStatus.running, read every
// POLL_MS), the page's buttons stay disabled, and the run's report replaces it when done.

import { agentPath, call } from "./api.js";
import { el } from "./dom.js";

export const POLL_MS = 500;

// A line that counts seconds and shows the run's step until stop() is called.
export class Progress {
  constructor(agentId) {
    this.agentId = agentId;
    this.node = el("p", { id: "dream-progress", hidden: true });
    this.node.setAttribute("role", "status");
    this.timer = null;
  }

  start(label) {
    const began = Date.now();
    let step = "starting";
    let asking = false;
    const tick = async () => {
      this.node.textContent = `${label}: running for ${Math.round((Date.now() - began) / 1000)} s · step: ${step}`;
      if (asking) return;
      asking = true;
      try {
        const status = await call("GET", agentPath(this.agentId, "/dream:status"));
        step = status.running || step;
      } catch {
        // the step stays as last read; the run's own answer reports any trouble
      } finally {
        asking = false;
      }
    };
    this.node.hidden = false;
    tick();
    this.timer = setInterval(tick, POLL_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.node.hidden = true;
  }
}

// The Run now form: `page.act` disables the buttons while it runs, `page.showReport` shows the answer.
export function runForm(page, progress) {
  const mode = el("select", { id: "dream-mode", title: "mode of the run" },
    el("option", { value: "propose" }, "propose"), el("option", { value: "auto" }, "auto"));
  const run = el("button", { type: "button", id: "dream-run" }, "Run now");
  run.addEventListener("click", () => {
    const label = `dreaming in ${mode.value} mode`;
    page.act(label, async () => {
      progress.start(label);
      try {
        page.showReport(await page.post("/dream:run", { mode: mode.value }));
      } finally {
        progress.stop();
      }
    });
  });
  return el("div", { className: "dream-run" }, mode, " ", run,
    el("span", { className: "muted" }, " propose: writes proposals only; auto: applies them through the guards"));
}
