// Session inspector: reads the engine's HTTP API (same origin) and
// renders one session. The selection lives in the URL fragment,
// #session=ID or #session=ID&until=SEQ, so a view can be linked and
// reloaded; a link may also use the query string, ?session=ID&until=SEQ
// (the fragment wins when both name a session). When the view has
// rendered, <body data-ready> is set to "ID@now" or "ID@SEQ" ("ID@error"
// when it failed; tests wait on it). The live view ("now") follows the
// session: every POLL_MS the page reads the session's sequence and
// re-renders when it moved (<body data-seq> is the sequence shown).
//
// Opening a session costs a handful of requests (#29): the session list,
// the registry, the budget table, the history pages and one resolve.
// Explaining every registry tool is on demand: the explain card, once
// opened for a session, explains one page of EXPLAIN_PAGE tools at a
// time (<body data-explained> is "ID@now" or "ID@SEQ" when a page is
// done), with one explain-batch request per page. The POSTs it sends
// (explain-batch, the call-check form) write nothing.
"use strict";

const API = "/v1";
const EXPLAIN_CONCURRENCY = 6;
const EXPLAIN_PAGE = 50;
// DEFAULT_PROVIDER is the API's default provider mode: native deferral.
const DEFAULT_PROVIDER = "anthropic";
const SESSIONS_PAGE = 50;
const WITHHELD_PAGE = 20;
const TURNS_SHOWN = 20;
const POLL_MS = 1500;

const state = {
  registry: null,      // GET /v1/registry, its first page of tools
  perms: new Map(),    // tool → permission, from the registry pages read
  provider: "",        // the provider mode shown (providerAt)
  budgetTable: null,   // GET /v1/budget (default session, for comparison)
  sessions: [],
  sessionPage: 0,      // the sessions list's page (SESSIONS_PAGE each)
  session: "",
  until: 0,            // 0: now
  full: null,          // full history of state.session (the timeline)
  live: null,          // the live resolve of state.session (policy card)
  seq: 0,              // the session's sequence the live view shows
  gen: 0,              // bumps on every load; stale responses are dropped
  online: true,        // false while the engine does not answer
  failed: false,       // the view's load failed (one error shown)
  explainOpen: "",     // the session whose explain card is open
  explainPage: 0,
  explainFilter: "all",
  withheldShown: WITHHELD_PAGE,
  allTurns: false,
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
  for (const c of children.flat(Infinity)) {
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

// Offline is the error of a request the engine did not answer at all
// (connection refused, reset): the page shows the "offline" badge.
class Offline extends Error {}

// setOnline shows or clears the top bar's "offline" badge.
function setOnline(on) {
  if (state.online === on) return;
  state.online = on;
  $("#conn").hidden = on;
  if (on) delete document.body.dataset.offline; else document.body.dataset.offline = "true";
}

// request calls the API: GET by default, or POST with a JSON body. An
// engine serving with --http-tokens needs a bearer token: asked once on
// the first 401, kept for the tab's life (sessionStorage).
async function request(path, body, retried = false) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem("engine-token");
  if (token) headers.Authorization = "Bearer " + token;
  const init = { headers };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const method = init.method || "GET";
  let r;
  try {
    r = await fetch(API + path, init);
  } catch (e) {
    setOnline(false);
    throw new Offline("The engine at " + location.host + " does not answer (" + method + " " + API + path + ": " + (e.message || e) + "). Is engine serve running? The page retries every " + POLL_MS / 1000 + " s.");
  }
  setOnline(true);
  if (r.status === 401 && !retried) {
    const t = window.prompt("This engine needs a bearer token (a read-only one is enough):");
    if (t) {
      sessionStorage.setItem("engine-token", t.trim());
      return request(path, body, true);
    }
  }
  let reply = null;
  try { reply = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = reply && reply.error ? reply.error.message : r.status + " " + r.statusText;
    const err = new Error(method + " " + API + path + ": " + msg);
    err.code = reply && reply.error ? reply.error.code : "";
    throw err;
  }
  return reply;
}

function getJSON(path) { return request(path); }

const enc = encodeURIComponent;

// showError shows the page's one error message (it replaces any other).
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
  const r = await getJSON("/sessions");
  state.sessions = r.sessions || [];
  renderSessions();
}

// filteredSessions is the session list after the filter box.
function filteredSessions() {
  const f = $("#session-filter").value.trim().toLowerCase();
  return state.sessions.filter((s) => !f || s.toLowerCase().includes(f));
}

// showSessionPage moves the list to the page holding session s.
function showSessionPage(s) {
  const i = filteredSessions().indexOf(s);
  if (i >= 0) state.sessionPage = Math.floor(i / SESSIONS_PAGE);
}

function renderSessions() {
  const ul = clear($("#sessions"));
  const list = filteredSessions();
  $("#session-count").textContent = state.sessions.length ? String(state.sessions.length) : "";
  const pages = Math.max(1, Math.ceil(list.length / SESSIONS_PAGE));
  state.sessionPage = Math.min(Math.max(state.sessionPage, 0), pages - 1);
  const from = state.sessionPage * SESSIONS_PAGE;
  const shown = list.slice(from, from + SESSIONS_PAGE);
  const pager = $("#session-pager");
  pager.hidden = list.length <= SESSIONS_PAGE;
  $("#page-label").textContent = list.length ? (from + 1) + "–" + (from + shown.length) + " of " + list.length : "";
  $("#page-prev").disabled = state.sessionPage === 0;
  $("#page-next").disabled = state.sessionPage >= pages - 1;
  pager.dataset.page = String(state.sessionPage + 1);
  pager.dataset.pages = String(pages);
  if (state.sessions.length === 0) {
    ul.append(el("li", { class: "muted none" }, "No sessions yet"));
    return;
  }
  if (list.length === 0) {
    ul.append(el("li", { class: "muted none" }, "No session matches the filter"));
    return;
  }
  for (const s of shown) {
    ul.append(el("li", { dataset: { session: s } },
      el("button", { type: "button", class: s === state.session ? "active" : "", title: s, onclick: () => go(s, 0) }, s)));
  }
}

function sessionPage(delta) {
  state.sessionPage += delta;
  renderSessions();
}

// ---------- loading a view ----------

// registryOnce fetches the registry once (retried after a failure).
let registryP = null;
function registryOnce() {
  if (!registryP) {
    // One page: the registry's version and tool count, and the
    // permissions of its first tools; the explain card reads the pages
    // it shows (a registry of 10,000 tools is 2 MB of names).
    registryP = getJSON("/registry?tool_limit=" + EXPLAIN_PAGE).then((r) => { state.registry = r; notePerms(r.tools); return r; });
    registryP.catch(() => { registryP = null; });
  }
  return registryP;
}

// notePerms remembers the permission of each registry tool a page named.
function notePerms(tools) {
  for (const t of tools || []) state.perms.set(t.name, t.permission || "");
}

// providerAt is the provider mode the session's backend sent at the
// cursor: the one the last turn begun at or before it recorded, else the
// API's default (native deferral). The tools, the prefix and the cache
// breaks are shown as that backend sends them.
function providerAt(full, until) {
  let p = "";
  for (const e of full.entries) {
    if (until && e.seq > Number(until)) break;
    if (e.type === "TurnStarted" && e.payload) p = e.payload.provider || "";
  }
  return p || DEFAULT_PROVIDER;
}

// budgetOnce fetches the default session's budget table once; it is a
// comparison only, so a failure just leaves it out (and is retried).
let budgetP = null;
function budgetOnce() {
  if (!budgetP) budgetP = getJSON("/budget").then((t) => { state.budgetTable = t; }, () => { budgetP = null; });
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
  delete document.body.dataset.explained;
  clearError();
  state.failed = false;
  const changed = session !== state.session;
  state.session = session;
  state.until = until;
  if (changed) {
    state.full = null;
    state.live = null;
    state.explainOpen = "";
    state.explainPage = 0;
    state.withheldShown = WITHHELD_PAGE;
    state.allTurns = false;
    showSessionPage(session);
  }
  renderSessions();
  if (!session) {
    $("#empty").hidden = false;
    $("#session-view").hidden = true;
    document.body.dataset.ready = "none";
    return;
  }
  $("#empty").hidden = true;
  $("#session-view").hidden = false;
  $("#session-body").hidden = false;
  $("#session-title").textContent = session;
  renderMode();
  renderExplainCard();
  try {
    const s = enc(session);
    await registryOnce();
    renderRegistry();
    // The timeline is always the whole history, so that one can travel
    // forward again, read page by page (the engine pages history, #24 row
    // 7). Moving the cursor within a session reuses the timeline; "now"
    // and the live view read only the pages after its last entry. The
    // state at the cursor is the one-entry page of the last event at or
    // before it.
    const fullP = state.full
      ? (until ? Promise.resolve(state.full) : moreHistory(s, state.full))
      : getHistory(s, 0, null);
    const atP = until ? fullP.then((full) => historyAt(s, full, until)) : fullP;
    const [full, at] = await Promise.all([fullP, atP]);
    if (gen !== state.gen) return;
    state.full = full;
    if (!until) {
      state.seq = full.state.seq;
      document.body.dataset.seq = String(full.state.seq);
    }
    renderTimeline(full, until);
    renderTurns(full, until);
    renderGrants(full, until);
    const point = at.entries.length ? at.entries[at.entries.length - 1] : null;
    renderIntent(at.state, point);
    // Tools at the cursor: the live resolve now; in the past, the history
    // entry's split, its resolution re-rendered (names override) for the
    // contract hash and classification, and each half re-rendered alone
    // for its token estimate (see pastBudget).
    let view, budget;
    const provider = providerAt(full, until);
    state.provider = provider;
    // if_none_match=* : the page shows the tools, not the rendering
    // (a native one defines every tool: megabytes on a large registry).
    const resolve = "/sessions/" + s + "/resolve?if_none_match=*&provider=" + enc(provider);
    if (!until) {
      view = await getJSON(resolve);
      state.live = view;
      budget = Object.assign({ exact: true }, view.budget);
    } else if (point && point.lists) {
      // A summarised entry (a large registry) names the first tools of
      // each list only: the figures are its counts, the tokens today's.
      view = await getJSON(resolve);
      budget = Object.assign({}, view.budget, { exact: false, movedSince: [], resident_tools: point.lists.provider, deferred_tools: point.lists.catalog });
    } else if (point) {
      const [v, a, b] = await Promise.all([point.tools, point.provider, point.catalog].map((names) =>
        names.length ? getJSON(resolve + "&override=" + enc(JSON.stringify({ kind: "names", names }))) : null));
      view = v || await getJSON(resolve + "&override=" + enc(JSON.stringify({ kind: "empty" })));
      budget = pastBudget(point, a, b);
    }
    await budgetOnce();
    if (gen !== state.gen) return;
    renderTools(view, budget, point, until);
    if (!until && view) fillToolList(view.tools || []);
    renderCheckpoint(at.state.checkpoint, view, until);
    await renderPolicy(gen, full);
    if (gen !== state.gen) return;
    document.body.dataset.ready = session + "@" + (until || "now");
    syncLive();
    if (live.dirty) { live.dirty = false; if (live.ok) load(); }
    if (state.explainOpen === session) loadExplain(gen);
  } catch (e) {
    if (gen === state.gen) failView(e);
  }
}

// failView replaces the view by the one error message: nothing of the
// session is shown as if it were current, and the mode badge says so.
function failView(e) {
  state.failed = true;
  showError(e);
  $("#session-body").hidden = true;
  const m = $("#mode");
  m.textContent = e instanceof Offline ? "offline" : "error";
  m.className = "badge out";
  document.body.dataset.ready = state.session + "@error";
}

function renderRegistry() {
  const r = state.registry;
  if (!r) return;
  $("#registry").textContent = "registry " + r.version + " · " + r.tool_count + " tools";
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
    case "DeferredLoaded": return "loaded " + ((p.names || []).join(", ") || "nothing") + (p.turn ? " in turn " + p.turn : "") + " · catalog → provider array";
    case "DeferredEvicted": return "unloaded " + (p.names || []).join(", ") + " · provider array → catalog";
    case "PermissionGranted": return (p.by || "?") + " allowed " + p.tool + " (" + (p.scope || "?") + (p.turn ? ", turn " + p.turn : "") + ")";
    case "TurnStarted": return "turn " + (p.turn || 0);
    case "TurnEnded": // since #28 the turn's checkpoint rides on its TurnEnded
      return "turn " + (p.turn || 0) + (p.checkpoint ? " · checkpoint " + checkpointText(p.checkpoint) : "");
    case "CheckpointRecorded": return checkpointText(p);
  }
  return "";
}

// checkpointText summarises a checkpoint: its contract, turn and loaded tools.
function checkpointText(c) {
  return "contract " + short(c.contract_hash) + " · turn " + (c.turn || 0) +
    ((c.loaded_deferred_tools || []).length ? " · loaded " + c.loaded_deferred_tools.join(", ") : "");
}

function fmtTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return { day: "", clock: String(t) };
  const iso = d.toISOString();
  return { day: iso.slice(0, 10), clock: iso.slice(11, 23) };
}

// DELTA_SHOWN is how many gained (or lost) names a timeline row lists
// before folding the rest under "N more" (a pattern can disable hundreds).
const DELTA_SHOWN = 8;

function deltaList(names, cls, sign) {
  const item = (n) => el("span", { class: cls }, sign + n);
  if (names.length <= DELTA_SHOWN) return names.map(item);
  return [names.slice(0, DELTA_SHOWN).map(item),
    el("details", { class: "more", onclick: (ev) => ev.stopPropagation() },
      el("summary", {}, (names.length - DELTA_SHOWN) + " more " + (cls === "gain" ? "gained" : "lost")),
      names.slice(DELTA_SHOWN).map(item))];
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
    const delta = el("td", { class: "delta" }, deltaList(e.gained || [], "gain", "+"), deltaList(e.lost || [], "loss", "−"));
    const prefix = e.prefix_changed
      ? el("td", { class: "prefix changed", title: "prefix " + e.prefix_hash },
        el("span", { class: "badge warn" }, "changed"), " ", el("span", { class: "cause" }, e.cause || "?"))
      : el("td", { class: "prefix", title: "prefix " + e.prefix_hash }, el("span", { class: "muted" }, "same"));
    prefix.append(" ", el("code", { class: "hash" }, short(e.prefix_hash, 8)));
    const row = el("tr", {
      class: cls.join(" "), tabindex: 0, dataset: { seq: e.seq, type: e.type || "" },
      title: "show the session as it was after seq " + e.seq,
      onclick: () => go(state.session, e.seq === last ? 0 : e.seq),
      onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); go(state.session, e.seq === last ? 0 : e.seq); } },
    },
    el("td", { class: "num seq" }, e.seq),
    el("td", { class: "time", title: e.time }, t.day !== prevDay ? el("span", { class: "day" }, t.day) : null, el("span", { class: "clock" }, t.clock)),
    el("td", { class: "who" }, el("span", { class: "channel" }, e.channel || "?"), e.actor ? el("span", { class: "actor" }, " / " + e.actor) : null),
    el("td", { class: "what" }, el("span", { class: "type" }, e.type || "?"), " ", el("span", { class: "summary" }, eventSummary(e, prevEntry)),
      e.error ? el("div", { class: "loss" }, e.error) : null),
    delta, prefix);
    prevDay = t.day;
    prevEntry = e;
    tb.append(row);
  }
}

// ---------- turns: the provider requests of each turn ----------

// turnsOf groups the timeline into turns. A turn's provider requests are
// the distinct tool prefixes it sent: the frozen array at TurnStarted,
// then each prefix change inside the turn (a tool_search load). A request
// whose prefix differs from the request before it (in this turn or the
// last one) breaks the provider's prompt cache; its causes are the
// prefix changes of the events since that request, each with its seq.
function turnsOf(entries) {
  const turns = [];
  let cur = null;
  let lastPrefix = "";
  let since = [];  // prefix changes since the last request
  const request = (e) => {
    const r = { seq: e.seq, type: e.type, prefix: e.prefix_hash, provider: e.provider || [], catalog: e.catalog || [],
      loaded: e.loaded || [], contract: e.dispatch ? e.dispatch.contract_hash : "", causes: [], hit: false, first: !lastPrefix };
    // A hit keeps the tools prefix and breaks no definition the history
    // references (prefix_changed counts both, by the provider's rule).
    if (lastPrefix && e.prefix_hash === lastPrefix && !since.length) r.hit = true;
    else if (lastPrefix) r.causes = since.slice();
    lastPrefix = e.prefix_hash;
    since = [];
    cur.requests.push(r);
  };
  for (const e of entries) {
    if (e.prefix_changed) since.push({ cause: e.cause || "?", seq: e.seq, type: e.type });
    if (e.error) continue;
    if (e.type === "TurnStarted") {
      cur = { turn: e.turn, start: e.seq, end: 0, channel: e.channel, actor: e.actor, requests: [] };
      turns.push(cur);
      request(e);
    } else if (cur && !cur.end && e.in_turn && e.turn === cur.turn) {
      if (e.prefix_changed) request(e);
    } else if (cur && !cur.end) {
      cur.end = e.seq;
    }
  }
  return turns;
}

function renderTurns(h, until) {
  const box = clear($("#turns"));
  const turns = turnsOf(h.entries || []);
  const count = $("#turns-count");
  count.textContent = turns.length ? String(turns.length) : "";
  if (!turns.length) {
    box.append(el("p", { class: "muted none" }, "No turn yet: a turn begins with turn.begin, which freezes the tools and sends the first provider request."));
    return;
  }
  const shown = state.allTurns ? turns : turns.slice(-TURNS_SHOWN);
  if (shown.length < turns.length) {
    box.append(el("p", { class: "muted" }, "The last " + shown.length + " of " + turns.length + " turns. ",
      el("button", { type: "button", id: "turns-all", onclick: () => { state.allTurns = true; renderTurns(state.full, state.until); } }, "show all")));
  }
  const tb = el("tbody");
  for (const t of shown) {
    const future = until && t.start > until;
    tb.append(el("tr", { class: "turn-head" + (future ? " future" : ""), dataset: { turn: t.turn } },
      el("td", { colspan: 5 }, el("strong", {}, "Turn " + t.turn), el("span", { class: "muted" },
        " · " + (t.channel || "?") + (t.actor ? " / " + t.actor : "") + " · seq " + t.start + (t.end ? "–" + t.end : " (open)") +
        " · " + t.requests.length + " provider request" + (t.requests.length === 1 ? "" : "s")))));
    t.requests.forEach((r, i) => {
      let cache;
      if (r.first) cache = el("span", { class: "muted" }, "first request of the session: nothing cached yet");
      else if (r.hit) cache = el("span", { class: "ok-text" }, "prefix kept: cache hit");
      else {
        cache = el("span", { class: "break" }, el("span", { class: "badge warn" }, "cache break"), " ",
          r.causes.length ? r.causes.map((c, j) => el("span", { class: "why" }, j ? ", " : "", el("span", { class: "cause" }, c.cause), " ",
            el("a", { href: "#session=" + enc(state.session) + "&until=" + c.seq, class: "seqlink" }, "seq " + c.seq), " " + c.type))
            : el("span", { class: "cause" }, "?"));
      }
      tb.append(el("tr", { class: "request" + (future || (until && r.seq > until) ? " future" : ""), dataset: { turn: t.turn, req: i + 1, seq: r.seq, prefix: r.prefix, hit: r.hit ? "hit" : r.first ? "first" : "break", cause: r.causes.map((c) => c.cause).join(",") } },
        el("td", { class: "num" }, "#" + (i + 1)),
        el("td", {}, el("a", { href: "#session=" + enc(state.session) + "&until=" + r.seq, class: "seqlink" }, "seq " + r.seq), " ", el("span", { class: "muted" }, r.type)),
        el("td", {}, el("code", { class: "hash", title: "prefix " + r.prefix }, short(r.prefix, 12))),
        el("td", {}, r.provider.length + " in the array", r.loaded.length ? el("span", { class: "muted" }, " (loaded " + r.loaded.join(", ") + ")") : null,
          el("span", { class: "muted" }, " · catalog " + r.catalog.length)),
        el("td", {}, cache)));
    });
  }
  box.append(el("div", { class: "scroll" }, el("table", { class: "turns", id: "turns-table" },
    el("thead", {}, el("tr", {}, el("th", { class: "num" }, "req"), el("th", {}, "at"), el("th", {}, "tools prefix"), el("th", {}, "tools"), el("th", {}, "prompt cache"))), tb)));
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
  const perm = state.perms;
  const gained = new Set(until && point.gained ? point.gained : []);
  const item = (name, where) => {
    const c = cls.get(name) || {};
    let tag, tagCls;
    if (c.resident || (where === "resident" && !c.deferred)) { tag = "resident"; tagCls = "resident"; } else if (loadedThen.has(name)) { tag = "deferred · loaded"; tagCls = "loaded"; } else { tag = "catalog"; tagCls = "catalog"; }
    return el("li", { dataset: { tool: name, class: tagCls }, class: gained.has(name) ? "gained" : "" },
      el("button", { type: "button", class: "name explain-one", title: "why is " + name + " in? (explain it)", onclick: () => explainOne(name) }, name),
      el("span", { class: "tag " + tagCls }, tag),
      perm.get(name) ? el("span", { class: "perm" }, perm.get(name)) : null);
  };
  for (const n of provider) res.append(item(n, "resident"));
  for (const n of catalog) cat.append(item(n, "catalog"));
  if (!provider.length) res.append(el("li", { class: "muted none" }, "no tools in the provider array"));
  if (!catalog.length) cat.append(el("li", { class: "muted none" }, "empty catalog"));
  // The API pages long lists (a view names 128 tools a list, a history
  // entry 64): the counts are the full lists'.
  const counts = until ? point.lists : view.lists && !view.lists.complete ? view.lists : null;
  const more = (ul, shown, total) => { if (total > shown) ul.append(el("li", { class: "muted more" }, "… and " + (total - shown) + " more")); };
  more(res, provider.length, counts ? counts.provider : 0);
  more(cat, catalog.length, counts ? counts.catalog : 0);
  $("#resident-count").textContent = String(counts ? counts.provider : provider.length);
  $("#catalog-count").textContent = String(counts ? counts.catalog : catalog.length);

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

// ---------- channel policy, grants and call-check (#31) ----------

// renderGrants lists the recorded answers to "ask" decisions: the
// session's PermissionGranted events (rejected ones say why).
function renderGrants(h, until) {
  const box = clear($("#grants"));
  const grants = (h.entries || []).filter((e) => e.type === "PermissionGranted");
  $("#grants-count").textContent = grants.length ? String(grants.length) : "";
  if (!grants.length) {
    box.append(el("li", { class: "muted none" }, "No recorded answers (PermissionGranted events)."));
    return;
  }
  for (const e of grants) {
    const p = e.payload || {};
    box.append(el("li", { class: (e.error ? "rejected" : "") + (until && e.seq > until ? " future" : ""), dataset: { tool: p.tool || "", seq: e.seq } },
      el("code", { class: "name" }, p.tool || "?"), " ",
      el("span", { class: "tag " + (e.error ? "deferred" : "resident") }, p.scope === "once" ? "once" + (p.turn ? " · turn " + p.turn : "") : p.scope || "?"),
      " allowed by ", el("strong", {}, p.by || "?"), " · ",
      el("a", { href: "#session=" + enc(state.session) + "&until=" + e.seq, class: "seqlink" }, "seq " + e.seq),
      el("span", { class: "muted" }, " · " + (e.channel || "?") + (e.actor ? " / " + e.actor : "")),
      e.error ? el("div", { class: "loss" }, "not applied: " + e.error) : null));
  }
}

// openTurnOf is the open turn of the timeline (its TurnStarted entry),
// or null.
function openTurnOf(h) {
  if (!h || !h.state.in_turn) return null;
  const es = h.entries || [];
  for (let i = es.length - 1; i >= 0; i--) if (es[i].type === "TurnStarted" && !es[i].error) return es[i];
  return null;
}

// renderPolicy fills the channel policy card from the live resolve: the
// policy version, and the tools it withholds with the rule of each. An
// open turn's view is its channel's (the TurnStarted's): call-check names
// the rule there; otherwise the view is the page's own requests' (their
// channel's rule, else the policy's "*" rule) and explain names the rule.
async function renderPolicy(gen, full) {
  const s = enc(state.session);
  let view = state.live;
  if (!view) {
    view = await getJSON("/sessions/" + s + "/resolve?if_none_match=*&provider=" + enc(state.provider || DEFAULT_PROVIDER));
    if (gen !== state.gen) return;
    state.live = view;
  }
  const turn = view.frozen ? openTurnOf(full) : null;
  const channel = turn ? turn.channel : "*";
  const ver = $("#policy-version");
  ver.textContent = view.policy || "none";
  ver.className = view.policy ? "val on" : "val unset";
  $("#policy-channel").textContent = (state.until ? "now (not at seq " + state.until + ") · " : "") + (turn
    ? "channel " + channel + " (the open turn " + view.turn + " was begun there)"
    : "the page's own requests (no turn is open; their channel's rule, else the policy's \"*\" rule; a turn resolves under its own channel)");
  $("#policy-note").textContent = view.policy ? "" : "This registry has no channel_policy: no tool is withheld and every call is allowed (default-allow).";
  $("#callcheck-channel").textContent = turn
    ? "decided for turn " + view.turn + "'s channel " + channel
    : "needs an open turn (turn.begin); the session has none now";
  const ul = clear($("#withheld"));
  const withheld = view.withheld || [];
  $("#withheld-count").textContent = withheld.length ? String(withheld.length) : "";
  if (!withheld.length) {
    ul.append(el("li", { class: "muted none" }, view.policy ? "The policy withholds nothing from this channel." : "Nothing withheld."));
    return;
  }
  const shown = withheld.slice(0, state.withheldShown);
  const rows = new Map();
  for (const name of shown) {
    const li = el("li", { dataset: { tool: name, state: "pending" } }, el("code", { class: "name" }, name), " ", el("span", { class: "rule muted" }, "…"));
    rows.set(name, li);
    ul.append(li);
  }
  if (shown.length < withheld.length) {
    ul.append(el("li", { class: "more" }, el("button", { type: "button", id: "withheld-more", onclick: () => {
      state.withheldShown += WITHHELD_PAGE;
      renderPolicy(state.gen, state.full);
    } }, "rules of " + Math.min(WITHHELD_PAGE, withheld.length - shown.length) + " more (" + (withheld.length - shown.length) + " not shown)")));
  }
  await pool(shown, async (name) => {
    let rule, detail;
    try {
      if (turn) {
        const cc = await request("/sessions/" + s + "/turn/call-check", { tool: name });
        rule = cc.rule || cc.reason; detail = cc.note;
      } else {
        const ex = await getJSON("/sessions/" + s + "/explain/" + enc(name));
        rule = ex.rule; detail = ex.detail;
      }
    } catch (e) {
      if (e instanceof Offline) throw e;
      rule = "error"; detail = e.message;
    }
    if (gen !== state.gen) return;
    const li = rows.get(name);
    li.dataset.state = "done";
    li.dataset.rule = rule;
    const r = li.querySelector(".rule");
    r.className = "rule";
    r.title = detail || "";
    r.textContent = "";
    r.append(el("code", {}, rule));
  });
}

// pool runs fn over items, EXPLAIN_CONCURRENCY at a time.
async function pool(items, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(EXPLAIN_CONCURRENCY, items.length) }, worker));
}

// callCheck posts the turn call-check operation for the form's tool and
// shows the decision with the rule (writes nothing).
async function callCheck(ev) {
  ev.preventDefault();
  const out = clear($("#callcheck-result"));
  const tool = $("#callcheck-tool").value.trim();
  delete out.dataset.decision;
  if (!tool || !state.session) return;
  out.append(el("span", { class: "muted" }, "checking " + tool + "…"));
  let r;
  try {
    r = await request("/sessions/" + enc(state.session) + "/turn/call-check", { tool });
  } catch (e) {
    clear(out).append(el("span", { class: "loss" }, e.code === "no_turn" ? "No open turn: call-check answers inside a turn (begin one with turn.begin). " + e.message : e.message));
    out.dataset.decision = "error";
    return;
  }
  const d = r.decision || "unknown";
  clear(out).append(
    el("div", { class: "decision" },
      el("span", { class: "badge " + (d === "allow" ? "in" : d === "deny" ? "out" : "warn"), id: "callcheck-decision" }, d),
      " ", el("span", { class: r.callable ? "ok-text" : "warn-text" }, r.callable ? "callable" : "not callable: " + r.reason),
      r.rule ? el("span", {}, " · rule ", el("code", { id: "callcheck-rule" }, r.rule)) : null,
      el("span", { class: "muted" }, " · channel " + (r.channel || "?") + " · turn " + r.turn + " · seq " + r.seq + (r.permission ? " · permission " + r.permission : ""))),
    el("div", { class: "note" }, r.note),
    r.grant ? el("div", { class: "muted" }, "answer: " + r.grant.by + " allowed " + r.grant.tool + " (" + r.grant.scope + ") at seq " + r.grant.seq) : null);
  out.dataset.decision = d;
  out.dataset.rule = r.rule || "";
  out.dataset.callable = String(!!r.callable);
}

// ---------- explain (on demand) ----------

// renderExplainCard shows the explain card closed (a button) or open.
function renderExplainCard() {
  const open = state.explainOpen === state.session && !!state.session;
  $("#explain-open").hidden = open;
  $("#explain-body").hidden = !open;
  if (!open) {
    const n = state.registry ? state.registry.tool_count : 0;
    $("#explain-progress").textContent = n ? n + " registry tools · explained on demand, " + EXPLAIN_PAGE + " per page" : "";
  }
}

function openExplain() {
  state.explainOpen = state.session;
  state.explainPage = 0;
  renderExplainCard();
  loadExplain(state.gen);
}

// explainOne opens the explain card on one tool (one request) and
// scrolls to it.
function explainOne(name) {
  $("#explain-search").value = name;
  openExplain();
  $("#explain-card").scrollIntoView({ block: "nearest" });
}

// explainPage reads the registry tools of the explain card's current
// page that its name filter keeps (one registry request): the engine
// filters and pages, so the page never holds the whole registry.
function explainPage() {
  const f = $("#explain-search").value.trim();
  const q = "/registry?tool_limit=" + EXPLAIN_PAGE + "&tool_offset=" + (state.explainPage * EXPLAIN_PAGE) + (f ? "&tool_filter=" + enc(f) : "");
  return getJSON(q).then((r) => { notePerms(r.tools); return r; });
}

// loadExplain explains the current page of registry tools at the cursor.
async function loadExplain(gen) {
  delete document.body.dataset.explained;
  const tb = clear($("#explain tbody"));
  let reg;
  try {
    reg = await explainPage();
  } catch (e) {
    if (gen !== state.gen) return;
    showError(e);
    $("#explain-progress").textContent = "explain failed: see the message above";
    document.body.dataset.explained = state.session + "@error";
    return;
  }
  if (gen !== state.gen) return;
  const total = reg.tool_count;
  const pages = Math.max(1, Math.ceil(total / EXPLAIN_PAGE));
  if (state.explainPage > pages - 1) { state.explainPage = pages - 1; return loadExplain(gen); }
  const from = state.explainPage * EXPLAIN_PAGE;
  const page = reg.tools;
  $("#explain-page").textContent = total ? (from + 1) + "–" + (from + page.length) + " of " + total : "no tool matches";
  $("#explain-prev").disabled = state.explainPage === 0;
  $("#explain-next").disabled = state.explainPage >= pages - 1;
  $("#explain-pager").hidden = total <= EXPLAIN_PAGE;
  const rows = new Map();
  for (const t of page) {
    const r = el("tr", { dataset: { tool: t.name, state: "pending" }, class: "pending" },
      el("td", {}, el("code", { class: "name" }, t.name), t.available ? null : el("span", { class: "tag deferred" }, "unavailable")),
      el("td", { class: "inout" }, el("span", { class: "muted" }, "…")),
      el("td", { class: "rule" }), el("td", { class: "detail" }), el("td", { class: "ev" }));
    rows.set(t.name, r);
    tb.append(r);
  }
  applyExplainFilter();
  const until = state.until;
  let done = 0;
  // explain answers for the page's own requests' channel, also while a
  // turn of another channel is open (the policy card has the turn's).
  const v = state.live;
  const star = v && v.policy && v.frozen ? " · explained for the page's own requests, not the open turn's channel (the policy card has the turn's)" : "";
  const progress = () => {
    $("#explain-progress").textContent = done < page.length ? "explaining " + done + " / " + page.length + "…" : (until ? "after seq " + until : "now") + " · " + page.length + " of " + (state.registry ? state.registry.tool_count : 0) + " tools" + star;
  };
  progress();
  if (!page.length) {
    document.body.dataset.explained = state.session + "@" + (until || "now");
    return;
  }
  const s = enc(state.session);
  const body = { tools: page.map((t) => t.name) };
  if (until) body.until = /^\d+$/.test(String(until)) ? Number(until) : String(until);
  // One explain-batch request for the page (#29), not one per tool.
  return request("/sessions/" + s + "/explain", body).then((reply) => {
    if (gen !== state.gen) return;
    for (const ex of (reply && reply.explanations) || []) {
      const row = rows.get(ex.tool);
      if (row) { fillExplain(row, ex); done++; }
    }
    progress();
    document.body.dataset.explained = state.session + "@" + (until || "now");
  }, (e) => {
    if (gen !== state.gen) return;
    showError(e); // one message for the card, not one per row
    $("#explain-progress").textContent = "explain failed: see the message above";
    document.body.dataset.explained = state.session + "@error";
  });
}

function fillExplain(row, ex) {
  const [, inout, rule, detail, ev] = row.children;
  clear(inout); clear(rule); clear(detail); clear(ev);
  row.classList.remove("pending");
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
  if (/^channel-|^decision\[/.test(rule)) return "the channel policy";
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

// The live view follows its session's event stream (#29): GET
// /v1/sessions/{s}/events/live, Server-Sent Events read with fetch (so
// that a bearer token goes along, which EventSource cannot send), resumed
// after the sequence the view shows. An event newer than the view loads
// it again; no request is polled while the stream is open, and the
// session list refreshes every LIST_MS. When the stream cannot be opened
// (an old engine, a proxy that buffers, three failures in a row) the page
// falls back to polling every POLL_MS. body.dataset.live says which:
// "stream" or "poll".
const LIST_MS = 15000;
const live = { session: "", ctrl: null, ok: false, failures: 0, dirty: false, listed: 0 };

function liveWanted() {
  const { session, until } = parseHash();
  return session && !until && !state.failed && session === state.session && document.body.dataset.ready && state.seq ? session : "";
}

function stopLive() {
  if (live.ctrl) live.ctrl.abort();
  live.ctrl = null;
  live.ok = false;
  live.session = "";
  document.body.dataset.live = "poll";
}

// syncLive opens the stream of the session on view, closing another's.
function syncLive() {
  const want = liveWanted();
  if (want && live.session === want && live.ctrl) return;
  if (!want && !live.ctrl) return;
  stopLive();
  if (!want || live.failures >= 3 || !window.TextDecoderStream) return;
  const ctrl = new AbortController();
  live.ctrl = ctrl;
  live.session = want;
  followLive(want, ctrl).catch(() => {}).finally(() => {
    if (live.ctrl !== ctrl) return; // closed or replaced on purpose
    live.ctrl = null;
    live.ok = false;
    live.session = "";
    document.body.dataset.live = "poll";
    live.failures++;
  });
}

async function followLive(s, ctrl) {
  const headers = { Accept: "text/event-stream", "Last-Event-ID": String(state.seq) };
  const token = sessionStorage.getItem("engine-token");
  if (token) headers.Authorization = "Bearer " + token;
  const r = await fetch(API + "/sessions/" + enc(s) + "/events/live", { headers, signal: ctrl.signal });
  if (!r.ok || !r.body) throw new Error("live stream: " + r.status);
  live.ok = true;
  live.failures = 0;
  document.body.dataset.live = "stream";
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let id = "", event = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("event:")) event = line.slice(6).trim();
      }
      if (event === "end" || event === "error" || (id && Number(id) > state.seq)) liveChanged();
    }
  }
}

// liveChanged loads the view again, now or when the load under way ends.
function liveChanged() {
  if (document.body.dataset.ready && !parseHash().until) load();
  else live.dirty = true;
}

// poll refreshes the session list and re-renders the live view when the
// session's sequence moved; it skips a hidden tab, a view in the past and
// a view still loading. While the live stream is open it only refreshes
// the session list every LIST_MS. While the engine does not answer it
// says so once (the offline badge and one message); when it answers
// again, a view that failed is loaded again.
let polling = false;
async function poll() {
  if (polling || document.hidden) return;
  syncLive();
  if (live.ok) {
    if (live.dirty && document.body.dataset.ready) { live.dirty = false; load(); }
    if (Date.now() - live.listed < LIST_MS) return;
    live.listed = Date.now();
    loadSessions().catch(() => {});
    return;
  }
  polling = true;
  try {
    const wasOffline = !state.online;
    await loadSessions();
    if (wasOffline) live.failures = 0;
    const { session, until } = parseHash();
    if (wasOffline) {
      // The engine answers again: a view it failed is loaded again (a
      // view that failed for another reason, such as a bad session id,
      // keeps its message until the user moves on).
      if (state.failed && session) { load(); return; }
      clearError();
    }
    if (!session || until || session !== state.session || !document.body.dataset.ready) return;
    const gen = state.gen;
    const v = await getJSON("/sessions/" + enc(session));
    if (gen === state.gen && v.seq !== state.seq) load();
  } catch (e) {
    if (e instanceof Offline && !state.failed) failView(e);
  } finally {
    polling = false;
  }
}

// ---------- start ----------

function start() {
  $("#refresh").addEventListener("click", () => loadSessions().catch(showError));
  $("#session-filter").addEventListener("input", () => { state.sessionPage = 0; renderSessions(); });
  $("#page-prev").addEventListener("click", () => sessionPage(-1));
  $("#page-next").addEventListener("click", () => sessionPage(1));
  $("#now").addEventListener("click", () => go(state.session, 0));
  $("#explain-open").addEventListener("click", openExplain);
  $("#explain-prev").addEventListener("click", () => { state.explainPage--; loadExplain(state.gen); });
  $("#explain-next").addEventListener("click", () => { state.explainPage++; loadExplain(state.gen); });
  $("#explain-search").addEventListener("change", () => { state.explainPage = 0; loadExplain(state.gen); });
  $("#callcheck-form").addEventListener("submit", callCheck);
  for (const b of document.querySelectorAll("#explain-filter button")) {
    b.addEventListener("click", () => { state.explainFilter = b.dataset.filter; applyExplainFilter(); });
  }
  window.addEventListener("hashchange", load);
  budgetOnce();
  registryOnce().then(() => { renderRegistry(); fillToolList(state.registry.tools); }, () => {});
  loadSessions().catch(() => {}).then(load);
  setInterval(poll, POLL_MS);
}

// fillToolList offers tool names to the call-check form: the registry's
// first page, and once a view is shown, its tools.
function fillToolList(tools) {
  const dl = clear($("#tool-names"));
  for (const t of tools) dl.append(el("option", { value: typeof t === "string" ? t : t.name }));
}

start();
