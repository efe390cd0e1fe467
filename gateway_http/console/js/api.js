// The suite's REST API as the console calls it: the key from sessionStorage as X-Api-Key,
// errors as ApiError with the suite's own message. The key is never put in a URL or a cookie.

const KEY_ITEM = "gateway-console-key";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

export function storeKey(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_ITEM);
}

// One call; `key` defaults to the stored one. Resolves to the parsed JSON answer.
export async function call(method, path, { body, key } = {}) {
  const headers = { "X-Api-Key": key ?? storedKey() ?? "" };
  const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const reply = await fetch(path, init);
  const text = await reply.text();
  let data = {};
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = { message: text };
  }
  if (!reply.ok) {
    throw new ApiError(reply.status, data.message || `HTTP ${reply.status}`);
  }
  return data;
}

export function agentPath(agentId, rest) {
  return `/api/v1/agents/${encodeURIComponent(agentId)}${rest}`;
}
