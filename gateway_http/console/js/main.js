// The console's start: sign-in and sign-out, then the Agents page.

import { ApiError, call, forgetKey, storedKey, storeKey } from "./api.js";
import { setText, show } from "./dom.js";
import { startAgents } from "./agents.js";

let stopAgents = null;

function signedOut(message = "") {
  if (stopAgents) {
    stopAgents();
    stopAgents = null;
  }
  forgetKey();
  show("nav", false);
  show("agents", false);
  show("sign-in", true);
  setText("sign-in-error", message);
  document.getElementById("api-key").value = "";
  document.getElementById("api-key").focus();
}

function signedIn() {
  show("sign-in", false);
  show("nav", true);
  show("agents", true);
  setText("sign-in-error", "");
  stopAgents = startAgents((message) => signedOut(`Signed out: ${message}`));
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
  signedIn();
}

document.getElementById("sign-in-form").addEventListener("submit", signIn);
document.getElementById("sign-out").addEventListener("click", () => signedOut());
if (storedKey()) {
  signedIn();
} else {
  signedOut();
}
