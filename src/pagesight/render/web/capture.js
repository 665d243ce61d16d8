// The DOM pass run in the page before capture (pagesight.render.web.browser).
// 1. Strip non-content chrome: elements matching the generic rules and the rules of every site
//    whose detector matches; fixed and sticky elements become static, so a full-length capture
//    does not repeat or overlay them.
// 2. Settle: lazy images become eager, and the pass waits (at most options.settle ms) until every
//    image has loaded and decoded (or failed) and the fonts are ready, so the pixels do not depend
//    on timing and a re-render gives the same tile.
// 3. Measure: the content height, and every line of visible text, every hyperlink and every
//    content block (paragraph, table, list, infobox, figure, code) with their boxes in page pixels.
// Everything is returned as one JSON string; nothing in the page is read back later.
async (options) => {
  const doc = document;
  const root = doc.documentElement;
  const stripped = [];
  const remove = (selector) => {
    let found;
    try {
      found = doc.querySelectorAll(selector);
    } catch (error) {
      return;
    }
    for (const element of found) {
      if (element !== doc.body && element !== root && element.isConnected) {
        element.remove();
        stripped.push(selector);
      }
    }
  };
  const sites = [];
  const extraCss = [];
  for (const rule of options.rules) {
    let matches = rule.detect === null;
    if (!matches) {
      try {
        matches = doc.querySelector(rule.detect) !== null;
      } catch (error) {
        matches = false;
      }
    }
    if (matches) {
      sites.push(rule.name);
      for (const selector of rule.strip) remove(selector);
      if (rule.css) extraCss.push(rule.css);
    }
  }
  if (doc.body) {
    for (const element of doc.body.querySelectorAll("*")) {
      const position = getComputedStyle(element).position;
      if (position === "fixed" || position === "sticky") element.style.setProperty("position", "static", "important");
    }
  }
  // No scrollbars, no caret, no animation: the capture must be the same every time.
  const style = doc.createElement("style");
  style.textContent =
    "html, body { overflow: visible !important; scrollbar-width: none !important; }" +
    "::-webkit-scrollbar { display: none !important; }" +
    "*, *::before, *::after { animation: none !important; transition: none !important; caret-color: transparent !important; }" +
    extraCss.join("\n");
  (doc.head || root).appendChild(style);
  if (doc.activeElement && doc.activeElement.blur) doc.activeElement.blur();

  // Settle: every image loaded (or failed), fonts ready; bounded by options.settle.
  const pending = [];
  for (const image of doc.images) {
    if (image.loading === "lazy") image.loading = "eager";
    // decode() settles once the image is loaded and decoded, ready to paint (or has failed): a loaded
    // but undecoded image can still be painted blank in the first capture and not in a later one.
    pending.push(image.decode().catch(() => undefined));
  }
  if (doc.fonts && doc.fonts.ready) pending.push(doc.fonts.ready);
  let settled = true;
  if (pending.length) {
    settled = await Promise.race([
      Promise.all(pending).then(() => true),
      new Promise((done) => setTimeout(() => done(false), options.settle)),
    ]);
  }
  window.scrollTo(0, 0);

  const sx = window.scrollX, sy = window.scrollY;
  const width = options.width;
  const bodyRect = doc.body ? doc.body.getBoundingClientRect() : { bottom: 0 };
  const contentHeight = Math.ceil(Math.max(root.scrollHeight, root.getBoundingClientRect().height, bodyRect.bottom + sy, 1));

  const KIND_OF = (element) => {
    for (let node = element; node && node !== doc.body; node = node.parentElement) {
      const tag = node.tagName;
      const cls = typeof node.className === "string" ? node.className : "";
      if (/\binfobox\b/.test(cls)) return "infobox";
      if (tag === "TABLE") return "table";
      if (tag === "FIGURE" || tag === "FIGCAPTION") return "figure";
      if (tag === "PRE") return "code";
      if (tag === "UL" || tag === "OL") return "list";
      if (tag === "DL" && !/\bpy\b|\bfunction\b|\bclass\b|\bmethod\b|\bdata\b|\battribute\b/.test(cls)) return "list";
    }
    return "paragraph";
  };
  const BLOCK = new Set(["block", "list-item", "table-cell", "table-caption", "flex", "grid", "table", "flow-root"]);
  const styles = new Map();
  const styleOf = (element) => {
    let style = styles.get(element);
    if (!style) {
      style = getComputedStyle(element);
      styles.set(element, style);
    }
    return style;
  };
  const blockOf = (element) => {
    for (let node = element; node; node = node.parentElement) {
      if (BLOCK.has(styleOf(node).display) || node === doc.body) return node;
    }
    return element;
  };

  // Fragments: runs of text on one line box, with their block and kind.
  const fragments = [];
  const blocks = new Map();
  const range = doc.createRange();
  const walker = doc.createTreeWalker(doc.body || root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.nodeValue;
    if (!text || !/\S/.test(text)) continue;
    const parent = node.parentElement;
    if (!parent) continue;
    const tag = parent.tagName;
    if (tag === "SCRIPT" || tag === "STYLE" || tag === "NOSCRIPT" || tag === "TEMPLATE") continue;
    const style = styleOf(parent);
    if (style.visibility !== "visible" || Number(style.opacity) === 0) continue;
    range.selectNodeContents(node);
    const rects = Array.from(range.getClientRects()).filter((r) => r.width > 0 && r.height > 0);
    if (rects.length === 0) continue;
    const block = blockOf(parent);
    let blockId = blocks.get(block);
    if (blockId === undefined) {
      blockId = blocks.size;
      blocks.set(block, blockId);
    }
    const kind = KIND_OF(parent);
    const push = (t, r) => {
      if (/\S/.test(t)) fragments.push({ t, x0: r.left + sx, y0: r.top + sy, x1: r.right + sx, y1: r.bottom + sy, b: blockId, k: kind });
    };
    const lines = new Set(rects.map((r) => Math.round(r.top)));
    if (lines.size === 1) {
      const r = range.getBoundingClientRect();
      push(text, r);
      continue;
    }
    // The node wraps over several lines: split it at word boundaries by the line each word sits on.
    const words = text.match(/\s*\S+\s*/g) || [];
    let offset = 0, lineText = "", lineRect = null, lineTop = null;
    for (const word of words) {
      range.setStart(node, offset);
      range.setEnd(node, offset + word.length);
      offset += word.length;
      const r = range.getClientRects()[0] || range.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      const top = Math.round(r.top);
      if (lineTop !== null && Math.abs(top - lineTop) > 2) {
        push(lineText, lineRect);
        lineText = "";
        lineRect = null;
      }
      lineTop = top;
      lineText += word;
      lineRect = lineRect
        ? { left: Math.min(lineRect.left, r.left), top: Math.min(lineRect.top, r.top), right: Math.max(lineRect.right, r.right), bottom: Math.max(lineRect.bottom, r.bottom) }
        : { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    }
    if (lineRect) push(lineText, lineRect);
  }

  // Lines: fragments of one block whose vertical extents overlap, joined left to right.
  fragments.sort((a, b) => a.b - b.b || a.y0 - b.y0 || a.x0 - b.x0);
  const lines = [];
  let current = null;
  for (const f of fragments) {
    const middle = (f.y0 + f.y1) / 2;
    if (current && current.b === f.b && middle > current.y0 && middle < current.y1) {
      current.parts.push(f);
      current.x0 = Math.min(current.x0, f.x0);
      current.x1 = Math.max(current.x1, f.x1);
      current.y0 = Math.min(current.y0, f.y0);
      current.y1 = Math.max(current.y1, f.y1);
    } else {
      current = { b: f.b, k: f.k, x0: f.x0, y0: f.y0, x1: f.x1, y1: f.y1, parts: [f] };
      lines.push(current);
    }
  }
  const spans = [];
  for (const line of lines) {
    line.parts.sort((a, b) => a.x0 - b.x0);
    let text = "";
    let right = null;
    for (const part of line.parts) {
      const piece = part.t.replace(/\s+/g, " ");
      if (text && right !== null && part.x0 - right > 1 && !/\s$/.test(text) && !/^\s/.test(piece)) text += " ";
      text += piece;
      right = part.x1;
    }
    text = text.trim();
    if (text) spans.push({ text, box: [line.x0, line.y0, line.x1, line.y1], kind: line.k });
  }

  // Hyperlinks: anchor text, resolved target, one box per line the link occupies.
  const links = [];
  for (const anchor of (doc.body || root).querySelectorAll("a[href]")) {
    const href = anchor.href;
    if (!href || href.startsWith("javascript:")) continue;
    const rects = Array.from(anchor.getClientRects()).filter((r) => r.width > 0 && r.height > 0);
    if (rects.length === 0) continue;
    const text = (anchor.innerText || anchor.textContent || anchor.getAttribute("title") || "").replace(/\s+/g, " ").trim();
    links.push({ text, url: href, boxes: rects.map((r) => [r.left + sx, r.top + sy, r.right + sx, r.bottom + sy]) });
  }

  // Figures: images and other replaced content that show pixels rather than text.
  const figures = [];
  for (const element of (doc.body || root).querySelectorAll("img, svg, canvas, video, picture")) {
    const r = element.getBoundingClientRect();
    if (r.width * r.height < 400) continue;
    const kind = KIND_OF(element);
    figures.push({ box: [r.left + sx, r.top + sy, r.right + sx, r.bottom + sy], kind: kind === "infobox" ? "infobox" : "figure" });
  }
  // Regions: the outermost table, list, infobox, figure and code block elements, whole, so that a
  // tile's kind weighs the area each covers (a table of short words still covers the tile).
  const REGION = "table, ul, ol, dl, figure, pre, .infobox";
  const regionKind = (element) => {
    const cls = typeof element.className === "string" ? element.className : "";
    if (/\binfobox\b/.test(cls)) return "infobox";
    const tag = element.tagName;
    if (tag === "TABLE") return "table";
    if (tag === "FIGURE") return "figure";
    if (tag === "PRE") return "code";
    if (tag === "DL" && /\bpy\b|\bfunction\b|\bclass\b|\bmethod\b|\bdata\b|\battribute\b/.test(cls)) return null;
    return "list";
  };
  const regions = [];
  for (const element of (doc.body || root).querySelectorAll(REGION)) {
    const kind = regionKind(element);
    if (!kind) continue;
    let outer = element.parentElement ? element.parentElement.closest(REGION) : null;
    while (outer && !regionKind(outer)) outer = outer.parentElement ? outer.parentElement.closest(REGION) : null;
    if (outer) continue;
    const r = element.getBoundingClientRect();
    if (r.width * r.height < 100) continue;
    regions.push({ box: [r.left + sx, r.top + sy, r.right + sx, r.bottom + sy], kind });
  }
  // As one JSON string: Playwright's own serialisation of a large object costs more than the pass.
  return JSON.stringify({
    title: doc.title || "",
    settled,
    height: contentHeight,
    scrollWidth: root.scrollWidth,
    width,
    sites,
    stripped: stripped.length,
    spans,
    links,
    figures,
    regions,
  });
}
