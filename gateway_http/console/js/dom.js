// Building the page without HTML parsing: every string becomes a text node (textContent),
// so memory text, session ids and reasons can never become markup.

// el("td", { className: "x", title: "t" }, "text", child, ...): attributes are set as
// properties from a fixed list of safe names; children are nodes or strings (text).
const SAFE_PROPS = new Set(["className", "title", "type", "value", "max", "min", "low", "high", "optimum",
  "disabled", "hidden", "id", "href"]);

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (!SAFE_PROPS.has(name)) {
      throw new Error(`el: property ${name} is not allowed`);
    }
    if (name === "href" && !String(value).startsWith("#")) {
      throw new Error("el: only in-page links");
    }
    node[name] = value;
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
}

export function show(id, visible) {
  document.getElementById(id).hidden = !visible;
}

export function setText(id, text) {
  document.getElementById(id).textContent = text;
}
