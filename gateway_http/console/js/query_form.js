// A form that sends its words as `?query=` to one GET route of the API and shows the answer: the
// Memory page's archive search and its "where did this go?" box. Elements get the ids
// `<name>-form`, `<name>-query`, `<name>-status` and `listId`.

import { call } from "./api.js";
import { clear, el } from "./dom.js";

// `show(reply)` answers { status, items }: the status line and the list items to show.
export function queryForm({ name, listId, listClass, placeholder, button, route, busy, failed, show }) {
  const input = el("input", { type: "search", id: `${name}-query` });
  input.placeholder = placeholder;
  const results = el("ol", { className: listClass, id: listId });
  const status = el("p", { className: "muted", id: `${name}-status` });
  const form = el("form", { id: `${name}-form` }, input, el("button", { type: "submit" }, button));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clear(results);
    status.textContent = busy;
    try {
      const answer = show(await call("GET", `${route}?${new URLSearchParams({ query: input.value })}`));
      status.textContent = answer.status;
      results.append(...answer.items);
    } catch (err) {
      status.textContent = `${failed}: ${err.message}`;
    }
  });
  return { form, status, results };
}
