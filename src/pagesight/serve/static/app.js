// The pagesight web page: ask or search, see the hits as tiles with their evidence boxes, open a
// citation as a zoomed region of its page. Plain JavaScript against the JSON API, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "pagesight-api-key";
const MARGIN = 120; // page pixels shown around the cited boxes
let writable = false;
let explainable = false; // a visual encoder that draws similarity maps: visual hits can show theirs

// The API ------------------------------------------------------------------------------------

function headers(extra = {}) {
  const key = sessionStorage.getItem(KEY);
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (response.status === 401) {
    $("key-form").hidden = false;
    $("key").focus();
    throw new Error("this server needs an API key");
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.error || `${response.status} ${response.statusText}`);
  }
  return response;
}

// Images come through fetch, not <img src>, so that they carry the key.
async function imageUrl(path) {
  const blob = await (await api(path)).blob();
  return URL.createObjectURL(blob);
}

function boxesParam(boxes) {
  return boxes.map((box) => box.map((v) => Math.round(v)).join(",")).join(";");
}

function query(params) {
  return new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null)).toString();
}

function say(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

// Clear the status if it still says ``text``: a later message (a filter's error) stays.
function unsay(text) {
  if ($("status").textContent === text) say("");
}

// The index ----------------------------------------------------------------------------------

async function loadStatus() {
  const status = await (await api("/api/status")).json();
  const info = status.index;
  writable = status.writable;
  explainable = Boolean(info.similarity_maps);
  $("summary").textContent =
    `${info.documents} documents, ${info.pages} pages, ${info.tiles} tiles` +
    (writable ? "" : " · read-only (start with --api-key to upload)");
  $("upload-form").querySelector("button").disabled = !writable;
}

async function loadDocuments() {
  // the documents the filter lets through: those searches and asks keep to
  const where = $("where").value.trim();
  const { documents } = await (await api(`/api/documents?${query({ where })}`)).json();
  const chosen = $("doc").value;
  $("doc").replaceChildren(new Option("all documents", ""), ...documents.map((d) => new Option(d.id, d.id)));
  $("doc").value = documents.some((d) => d.id === chosen) ? chosen : "";
  $("doc-count").textContent = `(${documents.length})`;
  $("documents").replaceChildren(
    ...documents.map((d) => {
      const item = document.createElement("li");
      item.textContent = `${d.id} · ${d.type}, ${d.pages} page${d.pages === 1 ? "" : "s"}`;
      if (writable) {
        const remove = document.createElement("button");
        remove.className = "secondary";
        remove.textContent = "×";
        remove.title = `delete ${d.id}`;
        remove.onclick = () => removeDocument(d.id);
        item.append(remove);
      }
      return item;
    }),
  );
}

async function removeDocument(id) {
  if (!confirm(`Delete ${id} from the index?`)) return;
  try {
    await api(`/api/documents/${encodeURIComponent(id)}`, { method: "DELETE" });
    await Promise.all([loadStatus(), loadDocuments()]);
  } catch (error) {
    say(error.message, true);
  }
}

// Asking and searching -----------------------------------------------------------------------

function options() {
  const doc = $("doc").value;
  return {
    question: $("question").value.trim(),
    mode: $("mode").value || null,
    doc_ids: doc ? [doc] : null,
    where: $("where").value.trim() || null,
    compression: Number($("compression").value) || 1,
  };
}

async function search() {
  const o = options();
  const params = query({ q: o.question, mode: o.mode, doc: o.doc_ids?.[0], where: o.where, c: o.compression });
  const data = await (await api(`/api/search?${params}`)).json();
  showHits(data);
  say(`${data.hits.length} tiles`);
}

const READING = "reading the tiles…";

async function ask() {
  const response = await api("/api/ask", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...options(), stream: true }),
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffered += decoder.decode(value || new Uint8Array(), { stream: !done });
    const lines = buffered.split("\n");
    buffered = lines.pop();
    for (const line of lines.filter(Boolean)) {
      const event = JSON.parse(line);
      if (event.event === "hits") {
        showHits(event);
        say(READING);
      } else if (event.event === "answer") {
        showAnswer(event.answer);
        unsay(READING);
      } else if (event.event === "error") {
        say(event.error, true);
      }
    }
    if (done) return;
  }
}

function showHits({ hits, image_tokens, compression, token_model }) {
  $("hits-cost").textContent = hits.length
    ? `${hits.length} tiles: ${image_tokens.toLocaleString()} image tokens for a ${token_model} reader at c = ${compression}`
    : "No tile matches.";
  $("hits").replaceChildren(...hits.map((hit, rank) => hitCard(hit, rank + 1, compression)));
}

function hitCard(hit, rank, compression) {
  const card = document.createElement("figure");
  card.className = "hit";
  card.tabIndex = 0;
  card.dataset.page = hit.page_id;
  const image = document.createElement("img");
  image.alt = `${hit.page_id} tile ${hit.tile}`;
  const params = { doc: hit.doc_id, page: hit.page, tile: hit.tile, c: Math.max(compression, 2) };
  // A hit whose best match is a table or figure (indexes made with layout regions) shows it whole.
  const shown = hit.region ? [hit.region.box, ...hit.boxes] : hit.boxes;
  if (shown.length) params.boxes = boxesParam(shown);
  imageUrl(`/api/tile?${query(params)}`).then((url) => (image.src = url), () => (image.alt += " (unavailable)"));
  const label = document.createElement("figcaption");
  label.className = "label";
  label.innerHTML = `<span>${rank}. <b></b> tile ${hit.tile}<i></i></span><span>${hit.score.toFixed(3)}</span>`;
  label.querySelector("b").textContent = hit.page_id;
  if (hit.region) label.querySelector("i").textContent = `, ${hit.region.kind}`;
  const snippet = document.createElement("p");
  snippet.className = "snippet";
  snippet.textContent = hit.snippet;
  card.append(image, label, snippet);
  if (explainable && hit.scores && "visual" in hit.scores) {
    // Which patches matched: the tile with its similarity map to the question, and back.
    const map = document.createElement("button");
    map.type = "button";
    map.className = "explain";
    map.textContent = "similarity map";
    const asked = $("question").value;
    let plain = null;
    map.onclick = async (event) => {
      event.stopPropagation();
      if (plain === null) {
        plain = image.src;
        image.src = await imageUrl(`/api/tile?${query({ ...params, boxes: undefined, explain: asked })}`);
        map.textContent = "evidence";
      } else {
        image.src = plain;
        plain = null;
        map.textContent = "similarity map";
      }
    };
    card.append(map);
  }
  const open = () => showRegion(hit.doc_id, hit.page, shown.length ? shown : [hit.tile_box], hit.page_id);
  card.onclick = open;
  card.onkeydown = (event) => event.key === "Enter" && open();
  return card;
}

function showAnswer(answer) {
  $("answer").hidden = false;
  $("answer-text").textContent =
    answer.answered === false
      ? `Not answered: ${answer.reason || "the reader declined"}`
      : answer.text || "No answer found in the retrieved pages.";
  $("answer-text").classList.toggle("declined", answer.answered === false);
  $("citations").replaceChildren(
    ...answer.citations.map((citation) => {
      const tile = answer.hits.find(
        (h) => h.doc_id === citation.doc_id && h.page === citation.page && h.tile === citation.tile,
      );
      const boxes = citation.boxes.length ? citation.boxes : tile ? [tile.tile_box] : [];
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = `#${citation.page_id}`;
      link.className = "citation";
      link.textContent = `${citation.page_id}, tile ${citation.tile}`;
      link.onclick = (event) => {
        event.preventDefault();
        showRegion(citation.doc_id, citation.page, boxes, citation.page_id);
      };
      item.append(link);
      if (citation.text && citation.text !== answer.text) {
        const quote = document.createElement("q");
        quote.textContent = citation.text;
        item.append(" ", quote);
      }
      return item;
    }),
  );
  const usage = answer.usage;
  const seconds = (answer.timings.total || 0).toFixed(2);
  $("answer-cost").textContent =
    `${answer.reader} reader: ${usage.image_tokens.toLocaleString()} image tokens (${usage.token_model}, c = ${usage.compression})` +
    `, ${answer.hits.length} tiles, ${seconds} s`;
}

// A cited region: the page with its boxes drawn (by the server), cut around them and enlarged.
let shown = null;

async function showRegion(doc, page, boxes, caption) {
  try {
    const params = { doc, page };
    if (boxes.length) params.boxes = boxesParam(boxes);
    const image = new Image();
    image.src = await imageUrl(`/api/page?${query(params)}`);
    await image.decode();
    shown = { image, boxes, caption, whole: !boxes.length };
    $("viewer").hidden = false; // first: a hidden viewer has no width to fit the canvas to
    draw();
    $("viewer").scrollIntoView({ behavior: "smooth", block: "nearest" });
  } catch (error) {
    say(error.message, true);
  }
}

function draw() {
  const { image, boxes, caption, whole } = shown;
  let [x0, y0, x1, y1] = [0, 0, image.naturalWidth, image.naturalHeight];
  if (!whole) {
    x0 = Math.max(0, Math.min(...boxes.map((b) => b[0])) - MARGIN);
    y0 = Math.max(0, Math.min(...boxes.map((b) => b[1])) - MARGIN);
    x1 = Math.min(image.naturalWidth, Math.max(...boxes.map((b) => b[2])) + MARGIN);
    y1 = Math.min(image.naturalHeight, Math.max(...boxes.map((b) => b[3])) + MARGIN);
  }
  const canvas = $("viewer-canvas");
  const scale = Math.min(3, ($("viewer").clientWidth - 20) / (x1 - x0), whole ? 900 / (y1 - y0) : 3);
  canvas.width = Math.round((x1 - x0) * scale);
  canvas.height = Math.round((y1 - y0) * scale);
  canvas.getContext("2d").drawImage(image, x0, y0, x1 - x0, y1 - y0, 0, 0, canvas.width, canvas.height);
  $("viewer-caption").textContent = whole ? `${caption}, whole page` : `${caption}, cited region`;
  $("viewer-whole").textContent = whole ? "cited region" : "whole page";
  $("viewer-whole").disabled = !boxes.length;
}

// Uploads ------------------------------------------------------------------------------------

function upload(files) {
  const form = new FormData();
  for (const file of files) form.append("files", file);
  for (const field of $("upload-meta").value.split(",")) {
    if (field.trim()) form.append("meta", field.trim());
  }
  const bar = $("upload-progress");
  bar.hidden = false;
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", "/api/documents");
    for (const [name, value] of Object.entries(headers())) request.setRequestHeader(name, value);
    request.upload.onprogress = (event) => {
      bar.max = event.total;
      bar.value = event.loaded;
      $("upload-status").textContent = "sending…";
    };
    request.onload = () => {
      const body = JSON.parse(request.responseText || "{}");
      request.status === 202 ? resolve(body.job) : reject(new Error(body.error || request.statusText));
    };
    request.onerror = () => reject(new Error("the upload failed"));
    request.send(form);
  });
}

async function follow(job) {
  const bar = $("upload-progress");
  while (job.state === "queued" || job.state === "running") {
    bar.max = job.total || 1;
    bar.value = job.done;
    $("upload-status").textContent = `${job.state}: ${job.done}/${job.total ?? "?"} files, ${job.pages} pages`;
    await new Promise((wake) => setTimeout(wake, 500));
    job = await (await api(`/api/jobs/${job.id}`)).json();
  }
  bar.hidden = true;
  const failed = job.failed.map((f) => `${f.file}: ${f.reason}`).join("; ");
  $("upload-status").textContent =
    job.state === "failed"
      ? `failed: ${job.error}`
      : `${job.added.length} added, ${job.replaced.length} replaced, ${job.unchanged.length} unchanged` +
        (failed ? `; ${failed}` : "");
  $("upload-status").classList.toggle("error", job.state === "failed" || job.failed.length > 0);
  await Promise.all([loadStatus(), loadDocuments()]);
}

// Wiring -------------------------------------------------------------------------------------

$("query-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const action = event.submitter?.value || "ask";
  $("answer").hidden = true;
  say(action === "ask" ? "searching…" : "");
  try {
    await (action === "ask" ? ask() : search());
  } catch (error) {
    say(error.message, true);
  }
});

$("where").addEventListener("change", () => loadDocuments().then(() => say(""), (error) => say(error.message, true)));

$("upload-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = $("files").files;
  if (!files.length) return;
  try {
    await follow(await upload(files));
    $("files").value = "";
  } catch (error) {
    $("upload-progress").hidden = true;
    $("upload-status").textContent = error.message;
    $("upload-status").classList.add("error");
  }
});

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value);
  $("key-form").hidden = true;
  start();
});

$("viewer-whole").onclick = () => {
  shown.whole = !shown.whole;
  draw();
};
$("viewer-close").onclick = () => ($("viewer").hidden = true);

async function start() {
  try {
    await loadStatus();
    await loadDocuments();
    say("");
  } catch (error) {
    say(error.message, true);
  }
}

start();
