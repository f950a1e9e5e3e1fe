// Session inspector: reads the engine's HTTP API (same origin, GET only)
// and renders one session. The selection lives in the URL fragment,
// #session=ID or #session=ID&until=SEQ, so a view can be linked and
// reloaded; a link may also use the query string, ?session=ID&until=SEQ
// (the fragment wins when both name a session). When every part of a
// view has rendered, <body data-ready> is set to "ID@now" or "ID@SEQ"
// (tests wait on it). The live view ("now") follows the session: every
// POLL_MS the page reads the session's sequence and re-renders when it
// moved (<body data-seq> is the sequence shown).
"use strict";

const API = "/v1";
const EXPLAIN_CONCURRENCY = 6;
const POLL_MS = 1500;

const state = {
  registry: null,      // GET /v1/registry
  budgetTable: null,   // GET /v1/budget (default session, for comparison)
  sessions: [],
  session: "",
  until: 0,            // 0: now
  full: null,          // full history of state.session (the timeline)
  seq: 0,              // the session's sequence the live view shows
  gen: 0,              // bumps on every load; stale responses are dropped
  explainFilter: "all",
};

// ---------- small helpers ----------

const $ = (sel) => document.querySelector(sel);

// el builds an element: el("td", {class: "x", title: "y"}, child, "text", ...).
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "dataset") Object.assign(n.dataset, v);
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); return n; }

function short(hash, n = 12) { return hash ? hash.slice(0, n) : ""; }

function fmtInt(n) { return (n || 0).toLocaleString("en-US"); }

function tri(v, on = "true", off = "false", unset = "unset") {
  return v === true ? on : v === false ? off : unset;
}

function chips(names, cls = "") {
  if (!names || names.length === 0) return el("span", { class: "muted" }, "none");
  return el("span", { class: "chips" }, names.map((n) => el("code", { class: "chip " + cls }, n)));
}

// An engine serving with --http-tokens needs a bearer token: asked once
// on the first 401, kept for the tab's life (sessionStorage).
async function getJSON(path, retried = false) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem("engine-token");
  if (token) headers.Authorization = "Bearer " + token;
  const r = await fetch(API + path, { headers });
  if (r.status === 401 && !retried) {
    const t = window.prompt("This engine needs a bearer token (a read-only one is enough):");
    if (t) {
      sessionStorage.setItem("engine-token", t.trim());
      return getJSON(path, true);
    }
  }
  let body = null;
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = body && body.error ? body.error.message : r.status + " " + r.statusText;
    throw new Error("GET " + API + path + ": " + msg);
  }
  return body;
}

const enc = encodeURIComponent;

function showError(err) {
  const box = $("#error");
  box.textContent = String(err && err.message ? err.message : err);
  box.hidden = false;
  document.body.dataset.error = box.textContent;
}

function clearError() {
  $("#error").hidden = true;
  delete document.body.dataset.error;
}

// ---------- routing ----------

function parseHash() {
  let p = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (!p.get("session")) p = new URLSearchParams(location.search);
  const until = parseInt(p.get("until") || "0", 10);
  return { session: p.get("session") || "", until: Number.isFinite(until) && until > 0 ? until : 0 };
}

function go(session, until) {
  let h = "#session=" + enc(session);
  if (until) h += "&until=" + until;
  if (location.hash === h) load(); else location.hash = h;
}

// ---------- sessions ----------

async function loadSessions() {
  try {
    const r = await getJSON("/sessions");
    state.sessions = r.sessions || [];
    renderSessions();
  } catch (e) { showError(e); }
}

function renderSessions() {
  const ul = clear($("#sessions"));
  const f = $("#session-filter").value.trim().toLowerCase();
  const list = state.sessions.filter((s) => !f || s.toLowerCase().includes(f));
  $("#session-count").textContent = state.sessions.length ? String(state.sessions.length) : "";
  if (state.sessions.length === 0) {
    ul.append(el("li", { class: "muted none" }, "No sessions yet"));
    return;
  }
  for (const s of list) {
    ul.append(el("li", { dataset: { session: s } },
      el("button", { type: "button", class: s === state.session ? "active" : "", title: s, onclick: () => go(s, 0) }, s)));
  }
}

// ---------- loading a view ----------

// registryOnce fetches the registry once (retried after a failure).
let registryP = null;
function registryOnce() {
  if (!registryP) {
    registryP = getJSON("/registry").then((r) => { state.registry = r; return r; });
    registryP.catch(() => { registryP = null; });
  }
  return registryP;
}

// budgetOnce fetches the default session's budget table once; it is a
// comparison only, so a failure just leaves it out.
let budgetP = null;
function budgetOnce() {
  if (!budgetP) budgetP = getJSON("/budget").then((t) => { state.budgetTable = t; }, () => {});
  return budgetP;
}

// HISTORY_PAGE is the page size the inspector asks for (the engine's
// maximum; a page also ends at about 512 KiB).
const HISTORY_PAGE = 1000;

// getHistory reads a session's timeline after sequence after (0: from the
// start), page by page, appending to prior (a timeline read before, or
// null): {session, entries, state} with the state after the last page.
async function getHistory(s, after, prior) {
  const entries = prior ? prior.entries.slice() : [];
  let page;
  for (;;) {
    page = await getJSON("/sessions/" + s + "/history?limit=" + HISTORY_PAGE + (after ? "&after_seq=" + after : ""));
    entries.push(...page.entries);
    if (!page.more) break;
    if (!(page.next_after_seq > after)) throw new Error("history of " + s + ": no progress after sequence " + after);
    after = page.next_after_seq;
  }
  return { session: page.session, entries, state: page.state };
}

// moreHistory brings a timeline up to date: the pages after its last entry.
function moreHistory(s, full) {
  const last = full.entries.length ? full.entries[full.entries.length - 1].seq : 0;
  return getHistory(s, last, full);
}

// historyAt is the history at sequence until: the one-entry page of the
// timeline's last event at or before it, whose state is the session then.
function historyAt(s, full, until) {
  let i = full.entries.length - 1;
  while (i >= 0 && full.entries[i].seq > until) i--;
  const after = i >= 0 ? full.entries[i].seq - 1 : 0;
  return getJSON("/sessions/" + s + "/history?until=" + until + "&limit=1" + (after ? "&after_seq=" + after : ""));
}

async function load() {
  const { session, until } = parseHash();
  const gen = ++state.gen;
  delete document.body.dataset.ready;
  clearError();
  const changed = session !== state.session;
  state.session = session;
  state.until = until;
  renderSessions();
  if (!session) {
    $("#empty").hidden = false;
    $("#session-view").hidden = true;
    document.body.dataset.ready = "none";
    return;
  }
  $("#empty").hidden = true;
  $("#session-view").hidden = false;
  $("#session-title").textContent = session;
  renderMode();
  try {
    const s = enc(session);
    const registry = await registryOnce();
    renderRegistry();
    // The timeline is always the whole history, so that one can travel
    // forward again, read page by page (the engine pages history, #24 row
    // 7). Moving the cursor within a session reuses the timeline; "now"
    // and the live view read only the pages after its last entry. The
    // state at the cursor is the one-entry page of the last event at or
    // before it.
    const fullP = !changed && state.full
      ? (until ? Promise.resolve(state.full) : moreHistory(s, state.full))
      : getHistory(s, 0, null);
    const atP = until ? fullP.then((full) => historyAt(s, full, until)) : fullP;
    const explainP = loadExplain(gen, registry, until);
    const [full, at] = await Promise.all([fullP, atP]);
    if (gen !== state.gen) return;
    state.full = full;
    if (!until) {
      state.seq = full.state.seq;
      document.body.dataset.seq = String(full.state.seq);
    }
    renderTimeline(full, until);
    const point = at.entries.length ? at.entries[at.entries.length - 1] : null;
    renderIntent(at.state, point);
    // Tools at the cursor: the live resolve now; in the past, the history
    // entry's split, its resolution re-rendered (names override) for the
    // contract hash and classification, and each half re-rendered alone
    // for its token estimate (see pastBudget).
    let view, budget;
    if (!until) {
      view = await getJSON("/sessions/" + s + "/resolve?provider=anthropic-engine");
      budget = Object.assign({ exact: true }, view.budget);
    } else if (point) {
      const [v, a, b] = await Promise.all([point.tools, point.provider, point.catalog].map((names) =>
        names.length ? getJSON("/sessions/" + s + "/resolve?provider=anthropic-engine&override=" + enc(JSON.stringify({ kind: "names", names }))) : null));
      view = v || await getJSON("/sessions/" + s + "/resolve?provider=anthropic-engine&override=" + enc(JSON.stringify({ kind: "empty" })));
      budget = pastBudget(point, a, b);
    }
    await budgetOnce();
    if (gen !== state.gen) return;
    renderTools(view, budget, point, until);
    renderCheckpoint(at.state.checkpoint, view, until);
    await explainP;
    if (gen !== state.gen) return;
    document.body.dataset.ready = session + "@" + (until || "now");
  } catch (e) {
    if (gen === state.gen) { showError(e); document.body.dataset.ready = session + "@error"; }
  }
}

function renderRegistry() {
  const r = state.registry;
  if (!r) return;
  $("#registry").textContent = "registry " + r.version + " · " + r.tools.length + " tools";
}

function renderMode() {
  const m = $("#mode");
  if (state.until) {
    m.textContent = "time travel · after seq " + state.until;
    m.className = "badge past";
    $("#now").hidden = false;
  } else {
    m.textContent = "live";
    m.className = "badge live";
    $("#now").hidden = true;
  }
}

// ---------- timeline ----------

// eventSummary describes e; prev is the entry before it (null for the
// first), so that a master-switch change can say it cleared a picked list.
function eventSummary(e, prev) {
  const p = e.payload;
  if (!p) return e.error ? "undecodable: " + e.error : "";
  switch (e.type) {
    case "ToolsToggled": {
      const was = prev && prev.intent && prev.intent.picked;
      const cleared = was && was.length && !(e.intent && e.intent.picked) ? " · clears picked " + was.join(", ") : "";
      return "enabled = " + tri(p.enabled, "true", "false", "null (follow profile)") + cleared;
    }
    case "WebSearchSet": return "web_search = " + tri(p.enabled, "on", "off", "unset");
    case "PresetChosen": return p.preset ? "preset = " + p.preset : "preset cleared";
    case "ToolDisabled": case "ToolEnabled": return p.name;
    case "ToolsPicked": return p.names ? "picked " + p.names.join(", ") : "picked cleared";
    case "DeferredLoaded": return (p.names || []).join(", ") + (p.turn ? " (turn " + p.turn + ")" : "");
    case "TurnStarted": case "TurnEnded": return "turn " + (p.turn || 0);
    case "CheckpointRecorded":
      return "contract " + short(p.contract_hash) + " · turn " + (p.turn || 0) +
        ((p.loaded_deferred_tools || []).length ? " · loaded " + p.loaded_deferred_tools.join(", ") : "");
  }
  return "";
}

function fmtTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return { day: "", clock: String(t) };
  const iso = d.toISOString();
  return { day: iso.slice(0, 10), clock: iso.slice(11, 23) };
}

function renderTimeline(h, until) {
  const tb = clear($("#timeline tbody"));
  const entries = h.entries || [];
  $("#session-sub").textContent = entries.length + " event" + (entries.length === 1 ? "" : "s") +
    (h.state.skipped ? " · " + h.state.skipped + " undecodable" : "") +
    " · last seq " + h.state.seq + " · turn " + h.state.turn + (h.state.in_turn ? " (open)" : "");
  if (entries.length === 0) {
    tb.append(el("tr", { class: "none" }, el("td", { colspan: 6, class: "muted" }, "This session has no events.")));
    return;
  }
  const last = entries[entries.length - 1].seq;
  let prevDay = "";
  let prevEntry = null;
  for (const e of entries) {
    const t = fmtTime(e.time);
    const cls = ["event"];
    if (e.error) cls.push("skipped");
    if (until && e.seq > until) cls.push("future");
    if ((until && e.seq === until) || (!until && e.seq === last)) cls.push("current");
    const delta = el("td", { class: "delta" },
      (e.gained || []).map((n) => el("span", { class: "gain" }, "+" + n)),
      (e.lost || []).map((n) => el("span", { class: "loss" }, "−" + n)));
    const prefix = e.prefix_changed
      ? el("td", { class: "prefix changed", title: "prefix " + e.prefix_hash },
        el("span", { class: "badge warn" }, "changed"), " ", el("span", { class: "cause" }, e.cause || "?"))
      : el("td", { class: "prefix", title: "prefix " + e.prefix_hash }, el("span", { class: "muted" }, "same"));
    prefix.append(" ", el("code", { class: "hash" }, short(e.prefix_hash, 8)));
    const row = el("tr", {
      class: cls.join(" "), tabindex: 0, dataset: { seq: e.seq },
      title: "show the session as it was after seq " + e.seq,
      onclick: () => go(state.session, e.seq === last ? 0 : e.seq),
      onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); go(state.session, e.seq === last ? 0 : e.seq); } },
    },
    el("td", { class: "num seq" }, e.seq),
    el("td", { class: "time", title: e.time }, t.day !== prevDay ? el("span", { class: "day" }, t.day + " ") : null, t.clock),
    el("td", { class: "who" }, el("span", { class: "channel" }, e.channel || "?"), e.actor ? el("span", { class: "actor" }, " / " + e.actor) : null),
    el("td", { class: "what" }, el("span", { class: "type" }, e.type || "?"), " ", el("span", { class: "summary" }, eventSummary(e, prevEntry))),
    delta, prefix);
    prevDay = t.day;
    prevEntry = e;
    tb.append(row);
  }
}

// ---------- intent ----------

function renderIntent(st, point) {
  const dl = clear($("#intent"));
  const it = st.intent || {};
  $("#intent-at").textContent = state.until ? "after seq " + state.until : "now, seq " + st.seq;
  const row = (k, v, key) => dl.append(el("div", { class: "kv-row", dataset: { key } }, el("dt", {}, k), el("dd", {}, v)));
  row("enabled", el("span", { class: "val " + tri(it.enabled, "on", "off", "unset") }, tri(it.enabled, "true", "false", "unset (follow profile)")), "enabled");
  row("web_search", el("span", { class: "val " + tri(it.web_search, "on", "off", "unset") }, tri(it.web_search, "on", "off", "unset")), "web_search");
  row("preset", it.preset ? el("code", {}, it.preset) : el("span", { class: "muted" }, "none"), "preset");
  row("disabled", chips(it.disabled, "off"), "disabled");
  row("picked", it.picked ? chips(it.picked) : el("span", { class: "muted" }, "unset"), "picked");
  row("loaded deferred", chips(st.loaded, "loaded"), "loaded");
  row("turn", (st.turn || 0) + (st.in_turn ? " (open)" : st.turn ? " (ended)" : ""), "turn");
  if (point && point.error) row("note", el("span", { class: "loss" }, "event undecodable: " + point.error), "note");
}

// ---------- tools and budget ----------

// pastBudget estimates the tokens of a past split: a is the resolve of
// its provider names alone, b of its catalog names alone. A half is exact
// when today's loaded set splits it as it was then (the provider half's
// prefix hash equals the entry's); a tool loaded since then is counted on
// today's side, and named.
function pastBudget(point, a, b) {
  const out = {
    resident: a ? a.budget.resident : 0, catalog: b ? b.budget.catalog : 0,
    resident_tools: point.provider.length, deferred_tools: point.catalog.length, exact: true, movedSince: [],
  };
  if (a && a.prefix_hash !== point.prefix_hash) out.exact = false;
  if (b) {
    const moved = point.catalog.filter((n) => !(b.catalog || []).includes(n));
    if (moved.length) { out.exact = false; out.movedSince = moved; }
  }
  out.total = out.resident + out.catalog;
  return out;
}

function renderTools(view, b, point, until) {
  const res = clear($("#resident"));
  const cat = clear($("#catalog"));
  const budget = clear($("#budget"));
  if (!view) {
    $("#tools-at").textContent = "";
    budget.append(el("p", { class: "muted" }, "No events at this point."));
    return;
  }
  // The split: live, from the resolve; in the past, from the history
  // entry (its loaded set), with the classification's loaded mark taken
  // from that point.
  const provider = until ? point.provider : view.provider || [];
  const catalog = until ? point.catalog : view.catalog || [];
  const loadedThen = new Set(until ? point.loaded : view.loaded || []);
  const cls = new Map((view.classification || []).map((c) => [c.name, c]));
  const perm = new Map((state.registry ? state.registry.tools : []).map((t) => [t.name, t.permission || ""]));
  const gained = new Set(until && point.gained ? point.gained : []);
  const item = (name, where) => {
    const c = cls.get(name) || {};
    let tag, tagCls;
    if (c.resident || (where === "resident" && !c.deferred)) { tag = "resident"; tagCls = "resident"; } else if (loadedThen.has(name)) { tag = "deferred · loaded"; tagCls = "loaded"; } else { tag = "deferred"; tagCls = "deferred"; }
    return el("li", { dataset: { tool: name, class: tagCls }, class: gained.has(name) ? "gained" : "" },
      el("code", { class: "name" }, name),
      el("span", { class: "tag " + tagCls }, tag),
      perm.get(name) ? el("span", { class: "perm" }, perm.get(name)) : null);
  };
  for (const n of provider) res.append(item(n, "resident"));
  for (const n of catalog) cat.append(item(n, "catalog"));
  if (!provider.length) res.append(el("li", { class: "muted none" }, "no tools in the provider array"));
  if (!catalog.length) cat.append(el("li", { class: "muted none" }, "empty catalog"));
  $("#resident-count").textContent = String(provider.length);
  $("#catalog-count").textContent = String(catalog.length);

  let at;
  if (until) at = "after seq " + until;
  else if (view.frozen) at = "frozen for open turn " + view.turn;
  else at = "now · source " + view.source;
  $("#tools-at").textContent = at + " · rendered for " + view.rendered_for;

  const total = Math.max(b.total || 0, 1);
  const approx = b.exact ? "" : "≈ ";
  budget.append(
    el("div", { class: "figures" },
      el("div", { class: "figure", id: "budget-total" }, el("span", { class: "big" }, approx + fmtInt(b.total)), el("span", { class: "lbl" }, "tokens per turn (estimate)")),
      el("div", { class: "figure", id: "budget-resident" }, el("span", { class: "big" }, fmtInt(b.resident)), el("span", { class: "lbl" }, "provider array · " + b.resident_tools + " tools")),
      el("div", { class: "figure", id: "budget-catalog" }, el("span", { class: "big" }, approx + fmtInt(b.catalog)), el("span", { class: "lbl" }, "catalog · " + b.deferred_tools + " names"))),
    el("div", { class: "bar", title: "provider array vs catalog" },
      el("span", { class: "seg resident", dataset: { w: (100 * (b.resident || 0) / total).toFixed(2) } }),
      el("span", { class: "seg catalog", dataset: { w: (100 * (b.catalog || 0) / total).toFixed(2) } })),
    el("div", { class: "budget-notes" },
      el("span", {}, "prefix ", el("code", { class: "hash", title: until ? point.prefix_hash : view.prefix_hash }, short(until ? point.prefix_hash : view.prefix_hash, 16))),
      el("span", {}, " · contract ", el("code", { class: "hash", title: view.contract_hash }, short(view.contract_hash, 16))),
      el("span", { id: "budget-registry" }, " · registry ", el("code", {}, until && point && point.registry_version ? point.registry_version : view.registry_version)),
      b.exact ? null : el("span", { class: "warn-text" }, " · catalog estimate leaves out " +
        (b.movedSince.length ? b.movedSince.join(", ") + " (loaded since)" : "nothing, but today's loaded set renders the provider array differently"))));
  // Widths via CSSOM (the page's CSP allows no inline style attributes).
  for (const seg of budget.querySelectorAll(".seg")) seg.style.width = seg.dataset.w + "%";
  const t = state.budgetTable;
  if (t) {
    budget.append(el("p", { class: "compare" },
      "Default session ({enabled: true}) for comparison: ", el("strong", {}, fmtInt(t.without_deferral.estimate)), " tokens without deferral → ",
      el("strong", {}, fmtInt(t.with_deferral.estimate + t.catalog.estimate)), " with deferral (",
      "−" + t.net_reduction_percent.toFixed(1) + "% net; real " + t.encoding + ": " + fmtInt(t.without_deferral.real) + " → " + fmtInt(t.with_deferral.real + t.catalog.real) + ")."));
  }
}

// ---------- checkpoint ----------

function renderCheckpoint(cp, view, until) {
  const box = clear($("#checkpoint"));
  if (!cp) {
    box.append(el("p", { class: "muted none" }, until ? "No checkpoint recorded by seq " + until + "." : "No checkpoint recorded yet."));
    return;
  }
  const live = view ? view.contract_hash : "";
  const same = live && live === cp.contract_hash;
  box.append(
    el("div", { class: "hashline" }, el("span", { class: "lbl" }, "contract hash"),
      el("code", { class: "hash full", id: "contract-hash", title: cp.contract_hash }, el("strong", {}, short(cp.contract_hash)), cp.contract_hash.slice(12))),
    el("dl", { class: "kv" },
      el("div", { class: "kv-row" }, el("dt", {}, "recorded at"), el("dd", {},
        cp.seq ? el("a", { href: "#session=" + enc(state.session) + "&until=" + cp.seq, class: "seqlink" }, "seq " + cp.seq) : "seq ?", " · turn " + (cp.turn || 0))),
      el("div", { class: "kv-row" }, el("dt", {}, "registry"), el("dd", {}, el("code", {}, cp.registry_version),
        state.registry && state.registry.version !== cp.registry_version ? el("span", { class: "warn-text" }, " (live registry is " + state.registry.version + ")") : null)),
      el("div", { class: "kv-row" }, el("dt", {}, "loaded deferred"), el("dd", {}, chips(cp.loaded_deferred_tools, "loaded"))),
      el("div", { class: "kv-row" }, el("dt", {}, until ? "contract then" : "live contract"), el("dd", {},
        live ? el("span", { class: same ? "ok-text" : "warn-text" }, same ? "matches the checkpoint" : "differs: " + short(live) + " (a resume reports the changes)") : "—"))),
    cp.contract && cp.contract.length ? el("details", {}, el("summary", {}, "contract: " + cp.contract.length + " tools"),
      el("table", { class: "contract" }, el("tbody", {}, cp.contract.map((c) => el("tr", {}, el("td", {}, el("code", {}, c.name)), el("td", {}, el("code", { class: "hash" }, short(c.hash, 16)))))))) : null);
}

// ---------- explain ----------

function loadExplain(gen, registry, until) {
  const tb = clear($("#explain tbody"));
  const rows = new Map();
  for (const t of registry.tools) {
    const r = el("tr", { dataset: { tool: t.name, state: "pending" }, class: "pending" },
      el("td", {}, el("code", { class: "name" }, t.name), t.available ? null : el("span", { class: "tag deferred" }, "unavailable")),
      el("td", { class: "inout" }, el("span", { class: "muted" }, "…")),
      el("td", { class: "rule" }), el("td", { class: "detail" }), el("td", { class: "ev" }));
    rows.set(t.name, r);
    tb.append(r);
  }
  applyExplainFilter();
  const names = registry.tools.map((t) => t.name);
  let done = 0;
  const progress = () => { $("#explain-progress").textContent = done < names.length ? "explaining " + done + " / " + names.length + "…" : (until ? "after seq " + until : "now") + " · " + names.length + " tools"; };
  progress();
  const q = until ? "?until=" + until : "";
  const s = enc(state.session);
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++];
      let ex;
      try {
        ex = await getJSON("/sessions/" + s + "/explain/" + enc(name) + q);
      } catch (e) {
        if (gen !== state.gen) return;
        ex = { tool: name, error: e.message };
      }
      if (gen !== state.gen) return;
      fillExplain(rows.get(name), ex);
      done++;
      progress();
    }
  };
  return Promise.all(Array.from({ length: Math.min(EXPLAIN_CONCURRENCY, names.length) }, worker));
}

function fillExplain(row, ex) {
  const [, inout, rule, detail, ev] = row.children;
  clear(inout); clear(rule); clear(detail); clear(ev);
  row.classList.remove("pending");
  if (ex.error) {
    row.dataset.state = "error";
    inout.append(el("span", { class: "badge warn" }, "error"));
    detail.append(el("span", { class: "loss" }, ex.error));
    return;
  }
  row.dataset.state = ex.included ? "in" : "out";
  row.classList.add(ex.included ? "in" : "out");
  inout.append(el("span", { class: "badge " + (ex.included ? "in" : "out") }, ex.included ? "in" : "out"));
  rule.append(el("code", {}, ex.rule));
  detail.textContent = ex.detail;
  if (ex.event) {
    const e = ex.event;
    ev.append(el("a", { href: "#session=" + enc(state.session) + "&until=" + e.seq, class: "seqlink", title: "show the session after this event" }, "seq " + e.seq),
      " ", el("span", { class: "type" }, e.type), el("span", { class: "muted" }, " · " + (e.channel || "?") + (e.actor ? " / " + e.actor : "")));
  } else {
    ev.append(el("span", { class: "muted" }, ruleOrigin(ex.rule)));
  }
  applyExplainFilter();
}

function ruleOrigin(rule) {
  if (/^profile:|^not-in-profile/.test(rule)) return "the profile";
  if (/^override/.test(rule)) return "the per-turn override";
  if (rule === "unavailable" || rule === "unknown-tool") return "the registry";
  return "no event (registry defaults)";
}

function applyExplainFilter() {
  const f = state.explainFilter;
  for (const r of document.querySelectorAll("#explain tbody tr")) {
    r.hidden = f !== "all" && r.dataset.state !== f && r.dataset.state !== "pending";
  }
  for (const b of document.querySelectorAll("#explain-filter button")) b.classList.toggle("on", b.dataset.filter === f);
}

// ---------- live refresh ----------

// poll re-renders the live view when the session's sequence moved, and
// refreshes the session list; it skips a hidden tab, a view in the past
// and a view still loading.
let polling = false;
async function poll() {
  if (polling || document.hidden) return;
  polling = true;
  try {
    await loadSessions();
    const { session, until } = parseHash();
    if (!session || until || session !== state.session || !document.body.dataset.ready) return;
    const gen = state.gen;
    const v = await getJSON("/sessions/" + enc(session));
    if (gen === state.gen && v.seq !== state.seq) load();
  } catch (e) {
    // the next poll tries again; a view error shows on load
  } finally {
    polling = false;
  }
}

// ---------- start ----------

function start() {
  $("#refresh").addEventListener("click", loadSessions);
  $("#session-filter").addEventListener("input", renderSessions);
  $("#now").addEventListener("click", () => go(state.session, 0));
  for (const b of document.querySelectorAll("#explain-filter button")) {
    b.addEventListener("click", () => { state.explainFilter = b.dataset.filter; applyExplainFilter(); });
  }
  window.addEventListener("hashchange", load);
  budgetOnce();
  registryOnce().then(renderRegistry, showError);
  loadSessions().then(load);
  setInterval(poll, POLL_MS);
}

start();
