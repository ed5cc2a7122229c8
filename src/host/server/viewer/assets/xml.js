// Pretty-printing with highlighting for XML payloads. Builds DOM nodes (never HTML strings), so
// a payload's text can never become markup in the page.

const TOKEN = /<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!\[CDATA\[[\s\S]*?\]\]>|<\/?[^>]*>|[^<]+/g;
const ATTR = /([^\s=]+)(\s*=\s*)("[^"]*"|'[^']*')/g;

function span(cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}

function kind(token) {
  if (!token.startsWith("<")) return "text";
  if (token.startsWith("<!--") || token.startsWith("<?") || token.startsWith("<![CDATA[")) return "other";
  if (token.startsWith("</")) return "close";
  return token.endsWith("/>") ? "empty" : "open";
}

// The parts of one tag: punctuation, name, attribute names and values.
function tag(token, out) {
  const close = token.startsWith("</");
  const empty = token.endsWith("/>");
  const inner = token.slice(close ? 2 : 1, empty ? -2 : -1);
  const name = inner.match(/^\s*[^\s/>]+/);
  out.push(span("x-p", close ? "</" : "<"));
  const nameText = name ? name[0] : "";
  out.push(span("x-t", nameText));
  const rest = inner.slice(nameText.length);
  let last = 0;
  for (const m of rest.matchAll(ATTR)) {
    out.push(document.createTextNode(rest.slice(last, m.index)));
    out.push(span("x-a", m[1]), span("x-p", m[2]), span("x-v", m[3]));
    last = m.index + m[0].length;
  }
  out.push(document.createTextNode(rest.slice(last)));
  out.push(span("x-p", empty ? "/>" : ">"));
}

function piece(token, out) {
  switch (kind(token)) {
    case "text": out.push(span("x-x", token.trim())); break;
    case "other": out.push(span("x-c", token)); break;
    default: tag(token, out);
  }
}

// `xml` as a <pre>, one element per line, indented by depth; an element holding only text
// stays on one line.
export function pretty(xml) {
  const tokens = (xml.match(TOKEN) || []).filter((t) => t.trim() !== "");
  const pre = document.createElement("pre");
  pre.className = "xml";
  pre.tabIndex = 0; // a long payload scrolls: from the keyboard too
  pre.setAttribute("aria-label", "XML payload");
  let depth = 0;
  const line = (parts, d) => {
    if (pre.childNodes.length) pre.append("\n");
    pre.append("  ".repeat(Math.max(d, 0)), ...parts);
  };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    const k = kind(t);
    const parts = [];
    if (k === "open" && kind(tokens[i + 1] || "") === "text" && kind(tokens[i + 2] || "") === "close") {
      piece(t, parts); piece(tokens[i + 1], parts); piece(tokens[i + 2], parts);
      line(parts, depth);
      i += 2;
    } else if (k === "open" && kind(tokens[i + 1] || "") === "close") {
      piece(t, parts); piece(tokens[i + 1], parts);
      line(parts, depth);
      i += 1;
    } else if (k === "open") {
      piece(t, parts); line(parts, depth); depth++;
    } else if (k === "close") {
      depth--; piece(t, parts); line(parts, depth);
    } else {
      piece(t, parts); line(parts, depth);
    }
  }
  return pre;
}
