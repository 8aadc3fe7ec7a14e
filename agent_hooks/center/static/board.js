// The command center's board: plain JavaScript, no build step, no CDN.
// Cards come from /api/live (a WebSocket: hello, then card / removed / event messages);
// drags (and a card's "Move to…" on a phone) send PATCH /api/hooks/sessions/<id>; the session panel reads /api/board/sessions/<id>.
// Every text from the server is set with textContent (never parsed as HTML).
"use strict";

// The states, in the person's words: the columns' names and the legend. The API keeps the ingest contract's names
// (idle, running, ...); the page shows these.
const STATES = {
  idle: {label: "Idle", means: "registered, but not started yet, or put back to run again"},
  running: {label: "Working", means: "the agent is at work. Marked “stalled” when it has been silent for longer than {stall}"},
  awaiting_review: {label: "Waiting for you", means: "its turn is over and it waits for your next prompt or a review, or it asks you something (under Needs you)"},
  completed: {label: "Finished", means: "the session ended"},
  failed: {label: "Failed", means: "the session ended on an error"},
};
const STATE_LABELS = Object.fromEntries(Object.entries(STATES).map(([k, v]) => [k, v.label]));
// Which column the phone's one list shows first, when nobody has chosen one: the first with sessions in it.
const PICK_ORDER = ["awaiting_review", "running", "failed", "idle", "completed"];
const board = {meta: null, cards: new Map(), seq: 0, ws: null, connected: false, open: null, filters: {},
               approvals: [], selected: null, seenApprovals: new Set(), pick: null, target: null, wanted: null,
               moving: null, notify: {mode: "off", why: ""}};
window.__board = board;  // for a person at the console (and the browser tests)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) node.dataset[dk] = dv;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function ago(ts) {
  if (!ts) return "-";
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

function clock(ts) { return ts ? new Date(ts * 1000).toLocaleTimeString() : "-"; }

function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 3500);
}

async function api(method, path, body) {
  const opts = {method, headers: {}};
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  let doc = null;
  try { doc = await r.json(); } catch (e) { doc = null; }
  return {status: r.status, ok: r.ok, doc: doc || {}};
}

// What each event of a session's history means, in words (the API keeps the event's own name).
const EVENT_WORDS = {start: "started", running: "working again", to_in_progress: "working again", tool_use: "used a tool",
                     prompt_ready: "ready for a prompt", to_review: "turn over", awaiting_review: "turn over",
                     exit: "ended", completed: "ended", exit_error: "ended on an error", failed: "ended on an error",
                     requeue: "put back to run again"};

// -- columns and cards ----------------------------------------------------------------

function buildColumns() {
  const main = document.getElementById("board");
  main.textContent = "";
  for (const s of board.meta.states) {
    const col = el("section", {class: "col", id: `col-${s}`, data: {state: s}, style: `--c: var(--${s})`},
      el("h2", {}, STATE_LABELS[s] || s, el("span", {class: "n"}, "0")),
      el("div", {class: "cards"}));
    col.addEventListener("dragover", (ev) => {
      const id = board.dragging;
      if (!id) return;
      if (allowed(id, s)) { ev.preventDefault(); ev.dataTransfer.dropEffect = "move"; }
    });
    col.addEventListener("drop", (ev) => {
      ev.preventDefault();
      const id = ev.dataTransfer.getData("text/plain") || board.dragging;
      endDrag();
      if (id) moveCard(id, s);
    });
    main.append(col);
  }
  const pick = document.getElementById("state-pick");
  pick.textContent = "";
  for (const s of board.meta.states) pick.append(el("option", {value: s}, STATE_LABELS[s] || s));
  renderLegend();
}

// The legend: each state in words (the same words as the columns and the cards).
function renderLegend() {
  const list = document.getElementById("legend-list");
  list.textContent = "";
  for (const s of board.meta.states) {
    const state = STATES[s];
    if (!state) continue;
    list.append(el("div", {class: "legend-item", style: `--c: var(--${s})`},
      el("dt", {}, state.label), el("dd", {}, state.means.replace("{stall}", stallWords()) + ".")));
  }
}

// On a phone the columns are one list: the state selector says which column it shows (CSS hides the others
// at phone width; on a wide screen every column shows and the selector is hidden).
function pickedState(counts) {
  if (board.pick && counts[board.pick] !== undefined) return board.pick;
  return PICK_ORDER.find((s) => counts[s] > 0) || "running";
}

function renderPick(counts) {
  const pick = document.getElementById("state-pick");
  const chosen = pickedState(counts);
  for (const o of pick.options) o.textContent = `${STATE_LABELS[o.value] || o.value} (${counts[o.value] || 0})`;
  if (pick.value !== chosen) pick.value = chosen;
  for (const col of document.querySelectorAll(".col")) col.classList.toggle("picked", col.dataset.state === chosen);
}

function choosePick(state) {
  board.pick = state;
  render();
}

function allowed(id, target) {
  const card = board.cards.get(id);
  if (!card || card.state === target) return false;
  return target in (board.meta.transitions[card.state] || {});
}

function endDrag() {
  board.dragging = null;
  for (const c of document.querySelectorAll(".col")) c.classList.remove("drop-ok", "drop-no");
  for (const c of document.querySelectorAll(".card.dragging")) c.classList.remove("dragging");
}

async function moveCard(id, state) {
  const r = await api("PATCH", `/api/hooks/sessions/${encodeURIComponent(id)}`, {state});
  if (r.status === 409) toast(`Not allowed: ${r.doc.error}`);
  else if (!r.ok) toast(`Move failed: ${r.doc.error || r.status}`);
  return r.ok;
}

// Where a card may be moved: what a drag offers, the columns that take it, in the columns' order.
function moveTargets(card) {
  return board.meta.states.filter((s) => s !== columnOf(card) && allowed(card.id, s));
}

// A touch screen cannot drag (and on a phone the other columns are not on screen): "Move to…" on the card
// offers the same moves as buttons. Which card has them open is kept in `board.moving`, so a render (any card's
// update) does not close them under a finger. Shown at phone width and on touch screens only (board.css).
function moveControl(card) {
  const targets = moveTargets(card);
  if (!targets.length) return null;
  const open = board.moving === card.id;
  const box = el("div", {class: "move" + (open ? " open" : ""), role: "group", "aria-label": "move to another state"},
    el("button", {type: "button", class: "move-toggle", "aria-expanded": open ? "true" : "false",
                  onclick: () => { board.moving = open ? null : card.id; render(); }},
       open ? "Keep it here" : "Move to…"),
    open ? targets.map((s) => el("button", {type: "button", class: "move-to", data: {state: s}, style: `--c: var(--${s})`,
                                            onclick: async () => {
                                              board.moving = null; render();
                                              if (await moveCard(card.id, s)) toast(`${card.label}: moved to ${STATE_LABELS[s] || s}`);
                                            }}, STATE_LABELS[s] || s)) : null);
  // Tapping here must not open the session's page or start a drag.
  for (const kind of ["click", "keydown", "mousedown", "dragstart"]) box.addEventListener(kind, (ev) => ev.stopPropagation());
  return box;
}

function matches(card) {
  const f = board.filters;
  return (!f.host || card.host === f.host) && (!f.agent || card.agent === f.agent) &&
         (!f.type || card.agent_type === f.type) && (!f.task || (card.task_id || "") === f.task);
}

// Sessions that need a person come first in their column: asked for input, then stopped on an error.
const NEEDS_PERSON = ["needs_input", "error"];
function personRank(card) {
  const i = NEEDS_PERSON.indexOf(card.waiting_on);
  return i < 0 ? NEEDS_PERSON.length : i;
}

// The column a card shows in (cards.column on the server: the contract's state, unless its host knows the
// session is alive).
function columnOf(card) {
  return card.column && STATES[card.column] ? card.column : card.state;
}

// How long "stalled" means, in words ("5 minutes").
function stallWords() {
  const s = Number(board.meta && board.meta.stalled_after_s) || 0;
  if (!s) return "a while";
  if (s < 120) return `${Math.round(s)} seconds`;
  return `${Math.round(s / 60)} minutes`;
}

// A card's one state, in words: what its column means for this session, a little more exactly (it asks you,
// it stopped on an error, it is stalled). Never the contract's or the host's own state names.
function stateWords(card) {
  const detail = card.waiting_detail ? `: ${clip(card.waiting_detail, 80)}` : "";
  if (card.waiting_on === "needs_input")
    return {cls: "waiting needs_input", text: `asks you${detail}`, title: "a permission prompt or a question waits for a person"};
  if (card.waiting_on === "error")
    return {cls: "waiting error", text: `stopped on an error${detail}`, title: "its turn ended on an error from the model's API"};
  const col = columnOf(card);
  if (col === "running" && ((card.badges || {}).stalled || card.own_state === "stalled"))
    return {cls: "stalled", text: "stalled", title: `no sign of it for more than ${stallWords()}`};
  if (col === "running") return {cls: "working", text: "working", title: STATES.running.means.replace("{stall}", stallWords())};
  if (col === "awaiting_review") {
    if (card.waiting_on === "awaiting" || card.own_state === "awaiting")
      return {cls: "waiting awaiting", text: `waiting for a prompt${detail}`, title: "its turn is over: it waits for your next prompt"};
    return {cls: "review", text: "waiting for review", title: STATES.awaiting_review.means};
  }
  const state = STATES[col];
  return {cls: col, text: state ? state.label.toLowerCase() : col, title: state ? state.means : ""};
}

function stateNode(card) {
  const w = stateWords(card);
  return el("span", {class: `badge state ${w.cls}`, title: w.title}, w.text);
}

function persistText(card) {
  const p = card.persist;
  if (!p) return null;
  if (!p.persists) return card.task_state;
  const held = `${card.task_state} · persists ${p.continuations}/${p.max_continuations}`;
  // The hold was let go: say so and why, or "3/3" reads as still holding.
  return p.let_go ? `${held} · allowed to stop: ${p.let_go}` : held;
}

// Dollars as a person reads them, the same everywhere (and as the CLI prints them: agent_hooks/money.py):
// "$1.25" from a dollar up; cents under it, whole from ten cents ("38¢"), to a tenth below ("3.5¢");
// "<0.1¢" for a trace, "0¢" for nothing. Rounded half up on integer tenths of a cent, as Python does there.
function money(x) {
  const v = Number(x);
  if (!Number.isFinite(v)) return "0¢";
  if (v < 0) return "-" + money(-v);
  const tenths = Math.floor(v * 1000 + 0.5);
  if (tenths === 0) return v > 0 ? "<0.1¢" : "0¢";
  if (tenths < 100) return `${Math.floor(tenths / 10)}.${tenths % 10}¢`;
  const cents = Math.floor(v * 100 + 0.5);
  if (cents < 100) return `${cents}¢`;
  return "$" + (cents / 100).toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});
}

// A card's cost, burn rate ($/h over the last 10 minutes) and budget; marked at 80 % of the budget.
function costLine(card) {
  const c = card.cost;
  if (!c) return null;
  const budget = c.budget_usd
    ? el("span", {class: "budget", title: `${c.budget_of} budget: spent of it`},
        `${c.budget_of} ${money(c.spent_usd)} of ${money(c.budget_usd)} (${Math.round(c.budget_pct)}%)`)
    : null;
  return el("div", {class: "cost" + (c.near ? " near" : ""), title: "cost · burn rate over the last 10 minutes"},
    el("span", {class: "usd"}, money(c.usd)),
    c.burn_usd_h > 0 ? el("span", {class: "burn"}, `${money(c.burn_usd_h)}/h`) : null,  // nothing spent lately: no rate
    budget,
    c.near ? el("span", {class: "badge near-budget"}, c.budget_pct >= 100 ? "budget spent" : "≥80% of budget") : null);
}

// The header's total: the fleet's spend today, in the current 5-hour window and its forecast, and a
// column per host (the command center's ledger: every host's messages); before it came, the cards' sum.
function renderSpend() {
  const f = board.cost || {hosts: {}};
  // A host whose messages are not in the ledger (it only forwards events): its cards' running totals.
  const others = {};
  for (const c of board.cards.values()) {
    if (!(c.host in (f.hosts || {}))) others[c.host] = (others[c.host] || 0) + ((c.cost && c.cost.today_usd) || 0);
  }
  const today = (f.today_usd || 0) + Object.values(others).reduce((a, b) => a + b, 0);
  document.getElementById("spend-today").textContent = money(today);
  const w = f.window;
  const fc = (f.forecast || {}).window;
  const win = document.getElementById("spend-window");
  win.textContent = w ? `window ${money(w.usd)} · ${money(f.burn_usd_h)}/h` : "no active window";
  win.title = w ? `the 5-hour window ${clock(w.start)}–${clock(w.end)}; burn rate over the last hour` : "";
  const fore = document.getElementById("spend-forecast");
  fore.hidden = !fc;
  if (fc) {
    fore.textContent = fc.reached ? `limit ${money(fc.limit_usd)} reached`
      : fc.reach_at && fc.within ? `limit ${money(fc.limit_usd)} at ${clock(fc.reach_at)}` : `under ${money(fc.limit_usd)}`;
    fore.classList.toggle("near", Boolean(fc.within));
  }
  const hosts = document.getElementById("spend-hosts");
  hosts.textContent = "";
  for (const [name, h] of Object.entries(f.hosts || {})) {
    hosts.append(el("span", {class: "spend-host", title: `${name}: today, and ${money(h.window_usd)} in the current window`},
      el("span", {class: "chip host"}, name), el("b", {}, money(h.today_usd))));
  }
  for (const [name, today] of Object.entries(others)) {
    hosts.append(el("span", {class: "spend-host", title: `${name}: today, from its sessions' forwarded totals`},
      el("span", {class: "chip host"}, name), el("b", {}, money(today))));
  }
}

// The session page's cost over time: an inline SVG (no library), one point per sample.
function costChart(series) {
  const NS = "http://www.w3.org/2000/svg", W = 360, H = 90, P = 4;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "cost-chart");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  const t0 = series[0][0], t1 = series[series.length - 1][0], top = series[series.length - 1][1] || 1;
  const x = (t) => P + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - 2 * P);
  const y = (u) => H - P - (u / top) * (H - 2 * P);
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("points", series.map(([t, u]) => `${x(t).toFixed(1)},${y(u).toFixed(1)}`).join(" "));
  svg.append(line);
  for (const [t, u] of series) {
    const dot = document.createElementNS(NS, "circle");
    dot.setAttribute("cx", x(t).toFixed(1)); dot.setAttribute("cy", y(u).toFixed(1)); dot.setAttribute("r", "2");
    const tip = document.createElementNS(NS, "title");
    tip.textContent = `${clock(t)} ${money(u)}`;
    dot.append(tip);
    svg.append(dot);
  }
  const label = document.createElementNS(NS, "title");
  label.textContent = `cost from ${clock(t0)} to ${clock(t1)}: ${money(top)}`;
  svg.prepend(label);
  return svg;
}

function cardNode(card) {
  const b = card.badges || {};
  const tmux = card.tmux_session && card.tmux_session !== card.label ? `tmux ${card.tmux_session}` : null;
  // Another kind of agent (OpenClaw) says so beside its name.
  const kind = card.agent_type && card.agent_type !== "claude-code" && card.agent_type !== card.agent ? card.agent_type : null;
  const who = [card.agent, kind, card.role, tmux].filter(Boolean).join(" · ");
  const badges = [];
  if (b.cancelled) badges.push(el("span", {class: "badge cancelled", title: b.cancel_reason || ""},
    b.cancelled_by === "task" ? "task cancelled" : "cancelled",
    b.cancel_delivered === false ? " (sending)" : ""));
  if (b.warned) badges.push(el("span", {class: "badge warned", title: "the guards warned the agent"},
    `${b.warned} warning${b.warned === 1 ? "" : "s"}`));
  if (b.denied) badges.push(el("span", {class: "badge denied", title: "tool calls the guards refused"}, `${b.denied} refused`));
  if (typeof launchBadge === "function") badges.push(launchBadge(card));  // launch.js: starting / refused
  const tool = card.current_tool
    ? el("div", {class: "tool" + (card.tool_running ? " on" : ""), title: card.current_command || ""},
        card.tool_running ? card.current_tool : `last: ${card.current_tool}`,
        card.current_command ? el("code", {class: "cmd"}, clip(card.current_command, 120)) : null)
    : null;
  const col = columnOf(card);
  const node = el("article", {class: "card" + (card.cost && card.cost.near ? " near-budget" : ""), draggable: "true", tabindex: "0", data: {id: card.id, state: col},
                              style: `--c: var(--${col})`, title: "open the session"},
    el("div", {class: "row1"}, el("span", {class: "label"}, card.label), el("span", {class: "chip host"}, card.host)),
    el("div", {class: "who"}, who || card.agent_type || ""),
    card.task_id ? el("div", {class: "task"}, `Task ${card.task_id}${card.task ? ": " + card.task : ""}`) : null,
    card.persist ? el("div", {class: `persist ${card.task_state}`, title: "task state · continuations used of the budget"},
                      persistText(card)) : null,
    tool,
    costLine(card),
    el("div", {class: "foot"},
      el("span", {class: "calls", title: "tool calls"}, `${card.tool_calls} tool call${card.tool_calls === 1 ? "" : "s"}`),
      el("span", {}, "·"),
      el("span", {class: "when", data: {ts: card.last_activity || ""}}, ago(card.last_activity)),
      el("span", {class: "sp"}),
      stateNode(card)),
    badges.some(Boolean) ? el("div", {class: "foot"}, badges) : null,
    typeof launchRefusal === "function" ? launchRefusal(card) : null,
    card.reply ? replyForm(card) : null,
    moveControl(card));
  node.addEventListener("dragstart", (ev) => {
    board.dragging = card.id;
    ev.dataTransfer.setData("text/plain", card.id);
    ev.dataTransfer.effectAllowed = "move";
    node.classList.add("dragging");
    for (const c of document.querySelectorAll(".col"))
      c.classList.add(allowed(card.id, c.dataset.state) ? "drop-ok" : "drop-no");
  });
  node.addEventListener("dragend", endDrag);
  node.addEventListener("click", () => openPanel(card.id));
  node.addEventListener("keydown", (ev) => { if (ev.key === "Enter") openPanel(card.id); });
  return node;
}

// Text from the server, cut to `n` characters (it is always set as text, never as HTML).
function clip(text, n) {
  const s = String(text || "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// A session awaiting its next prompt in a tmux pane: its host's server types the reply there.
function replyForm(card) {
  const input = el("input", {type: "text", class: "reply-text", maxlength: "4000", placeholder: "reply (typed into its terminal)",
                             "aria-label": "reply"});
  const status = el("span", {class: "reply-msg", role: "status"});
  const send = async (ev) => {
    ev.preventDefault(); ev.stopPropagation();
    const text = input.value.trim();
    if (!text) { status.textContent = "write a reply first"; return; }
    const r = await api("POST", `/api/sessions/${encodeURIComponent(card.id)}/reply`, {text});
    status.className = "reply-msg" + (r.ok ? " ok" : " err");
    status.textContent = r.ok ? (r.doc.applied === "sent" ? `sent to ${r.doc.host}` : "typed") : (r.doc.error || `HTTP ${r.status}`);
    if (r.ok) input.value = "";
  };
  const form = el("form", {class: "reply", onsubmit: send}, input, el("button", {type: "submit"}, "Reply"), status);
  // Typing in the field must not open the page or start a drag.
  for (const kind of ["click", "keydown", "mousedown", "dragstart"]) form.addEventListener(kind, (ev) => ev.stopPropagation());
  form.draggable = false;
  return form;
}

function render() {
  if (!board.meta) return;
  const groups = Object.fromEntries(board.meta.states.map((s) => [s, []]));
  for (const card of board.cards.values()) {
    const where = columnOf(card);
    if (matches(card) && groups[where]) groups[where].push(card);
  }
  renderPick(Object.fromEntries(Object.entries(groups).map(([s, list]) => [s, list.length])));
  for (const [state, list] of Object.entries(groups)) {
    list.sort((a, b) => personRank(a) - personRank(b) || (b.last_activity || 0) - (a.last_activity || 0));
    const col = document.getElementById(`col-${state}`);
    col.querySelector(".n").textContent = String(list.length);
    const box = col.querySelector(".cards");
    const typing = box.contains(document.activeElement) && document.activeElement.classList.contains("reply-text")
      ? {id: document.activeElement.closest(".card").dataset.id, value: document.activeElement.value} : null;
    box.textContent = "";
    if (!list.length) box.append(el("div", {class: "empty"}, "no sessions"));
    for (const card of list) box.append(cardNode(card));
    if (typing) {  // a render must not eat what someone is typing into a Reply field
      const again = box.querySelector(`.card[data-id="${CSS.escape(typing.id)}"] .reply-text`);
      if (again) { again.value = typing.value; again.focus(); }
    }
  }
  renderFilters();
  renderSpend();
  if (board.open && board.cards.has(board.open)) refreshPanelHead(board.cards.get(board.open));
}

function renderFilters() {
  const values = {host: new Set(), agent: new Set(), type: new Set(), task: new Set()};
  for (const c of board.cards.values()) {
    values.host.add(c.host); if (c.agent) values.agent.add(c.agent); if (c.task_id) values.task.add(c.task_id);
    if (c.agent_type) values.type.add(c.agent_type);
  }
  for (const key of ["host", "agent", "type", "task"]) {
    const sel = document.getElementById(`f-${key}`);
    const want = [...values[key]].sort();
    const have = [...sel.options].slice(1).map((o) => o.value);
    if (JSON.stringify(want) === JSON.stringify(have)) continue;
    const current = sel.value;
    sel.length = 1;
    for (const v of want) sel.append(el("option", {value: v}, v));
    sel.value = want.includes(current) ? current : "";
  }
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

function flash(id) {
  const node = document.querySelector(`.card[data-id="${CSS.escape(id)}"]`);
  if (!node) return;
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 700);
}

// -- live updates -----------------------------------------------------------------------

function setConn(state, text) {
  const c = document.getElementById("conn");
  c.dataset.state = state;
  document.getElementById("conn-text").textContent = text;
}

// The OpenClaw gateway's connection (docs/openclaw.md): shown only when one is configured.
function setGateway(gw) {
  const g = document.getElementById("gateway");
  if (!gw) { g.hidden = true; return; }
  g.hidden = false;
  g.dataset.state = gw.state === "connected" ? "live" : (gw.state === "down" ? "down" : "connecting");
  const since = gw.since ? ` since ${new Date(gw.since * 1000).toLocaleTimeString()}` : "";
  document.getElementById("gateway-text").textContent = `OpenClaw ${gw.state}`;
  g.title = `OpenClaw gateway ${gw.url}: ${gw.state}${since}${gw.last_error ? " — " + gw.last_error : ""}`;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/api/live`);
  board.ws = ws;
  ws.onopen = () => { board.retry = 0; };
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    board.seq = msg.seq;
    if (msg.type === "hello") {
      board.cards = new Map(msg.cards.map((c) => [c.id, c]));
      board.connected = true;
      document.getElementById("host").textContent = msg.host;
      setConn("live", "live");
      if (msg.approvals) setApprovals(msg.approvals, msg.approvals_left_out);
      setGateway(msg.openclaw);
      if (msg.cost) board.cost = msg.cost;
      setCardsLeftOut(msg.cards_left_out);
      render();
    } else if (msg.type === "card") {
      board.cards.set(msg.card.id, msg.card);
      scheduleRender();
      if (board.open === msg.card.id) schedulePanelRefresh();
    } else if (msg.type === "removed") {
      board.cards.delete(msg.id);
      scheduleRender();
    } else if (msg.type === "event") {
      setTimeout(() => flash(msg.id), 50);
    } else if (msg.type === "approvals") {
      setApprovals(msg.approvals, msg.left_out);
    } else if (msg.type === "cards_left_out") {
      setCardsLeftOut(msg.count);
    } else if (msg.type === "openclaw") {
      setGateway(msg.openclaw);
    } else if (msg.type === "cost") {
      board.cost = msg.cost;
      renderSpend();
    }
  };
  ws.onclose = () => {
    board.connected = false;
    const wait = Math.min(5000, 300 * 2 ** (board.retry || 0));
    board.retry = (board.retry || 0) + 1;
    setConn("down", "reconnecting…");
    setTimeout(connect, wait);
  };
}

// -- the session panel --------------------------------------------------------------------

function refreshPanelHead(card) {
  const panel = document.getElementById("panel");
  panel.style.setProperty("--c", `var(--${columnOf(card)})`);
  document.getElementById("p-title").textContent = card.label;
  const sub = document.getElementById("p-sub");
  sub.textContent = "";
  const b = card.badges || {};
  // Element.append writes null as the text "null": only the parts that exist are appended.
  sub.append(...[
    el("span", {class: "chip col-state", title: (STATES[columnOf(card)] || {}).means || ""}, STATE_LABELS[columnOf(card)] || columnOf(card)),
    stateNode(card),
    el("span", {class: "chip host"}, card.host),
    el("span", {}, [card.agent, card.role, card.tmux_session && `tmux ${card.tmux_session}`].filter(Boolean).join(" · ")),
    el("span", {}, `id ${card.id}`),
    card.persist ? el("span", {class: `persist ${card.task_state}`}, `task ${persistText(card)}`) : null,
    b.cancelled ? el("span", {class: "badge cancelled"}, `cancelled: ${b.cancel_reason || "no reason"}`) : null,
    card.current_tool ? el("span", {class: "tool-now"}, `${card.tool_running ? "running" : "last"}: ${card.current_tool}`,
      card.current_command ? el("code", {class: "cmd"}, clip(card.current_command, 200)) : null) : null,
  ].filter(Boolean));
  document.getElementById("p-cancel-task").hidden = !card.task_id;
  const reply = document.getElementById("p-reply");
  reply.textContent = "";
  if (card.reply) reply.append(replyForm(card));
}

let panelTimer = null;
function schedulePanelRefresh() {
  clearTimeout(panelTimer);
  panelTimer = setTimeout(() => loadPanel(board.open), 250);
}

function openPanel(id) {
  board.open = id;
  if (location.hash !== `#/session/${encodeURIComponent(id)}`) history.replaceState(null, "", `#/session/${encodeURIComponent(id)}`);
  document.getElementById("panel").hidden = false;
  document.getElementById("p-msg").textContent = "";
  const card = board.cards.get(id);
  if (card) refreshPanelHead(card);
  loadPanel(id);
}

function closePanel() {
  board.open = null;
  document.getElementById("panel").hidden = true;
  history.replaceState(null, "", location.pathname);
}

function kv(pairs) {
  const dl = el("dl", {class: "kv"});
  for (const [k, v] of pairs) if (v !== null && v !== undefined && v !== "") dl.append(el("dt", {}, k), el("dd", {}, v));
  return dl;
}

async function loadPanel(id) {
  if (!id) return;
  const r = await api("GET", `/api/board/sessions/${encodeURIComponent(id)}`);
  if (board.open !== id) return;
  if (!r.ok) { document.getElementById("p-msg").textContent = r.doc.error || `HTTP ${r.status}`; return; }
  const d = r.doc;
  refreshPanelHead(d.card);
  const task = document.getElementById("p-task");
  task.textContent = "";
  if (d.task) task.append(kv([["task", d.task.task_id], ["state", d.task.state], ["description", d.task.description],
                               ["progress", d.task.progress], ["cancel reason", d.task.cancel_reason],
                               ["persists", d.task.persists === undefined ? null : (d.task.persists ? "yes" : "no")],
                               ["continuations", d.task.persists ? `${d.task.continuations} of ${d.task.max_continuations}` : null]]));
  else if (d.prompt) task.append(kv([["first prompt", d.prompt]]));
  else task.append(el("span", {class: "none"}, "no task"));
  const last = document.getElementById("p-last");
  last.textContent = d.last_message || (d.card.local ? "(nothing yet)" : `(other host: last event ${d.card.last_event || "-"}${d.card.metadata ? " — " + d.card.metadata : ""})`);
  const cost = document.getElementById("p-cost");
  cost.textContent = "";
  const c = d.card.cost || {};
  cost.append(kv([["cost", money(c.usd)], ["burn rate", `${money(c.burn_usd_h)}/h over the last 10 minutes`],
                  ["today", money(c.today_usd)],
                  ["budget", c.budget_usd ? `${c.budget_of}: ${money(c.spent_usd)} of ${money(c.budget_usd)} (${Math.round(c.budget_pct)}%)` : null]]));
  if ((d.cost_series || []).length) cost.append(costChart(d.cost_series));
  else cost.append(el("span", {class: "none"}, "no cost recorded yet"));
  const usage = document.getElementById("p-usage");
  usage.textContent = "";
  if (d.usage) {
    const u = d.usage, pct = Math.round((u.context_fill || 0) * 1000) / 10;
    usage.append(
      el("div", {}, `context ${u.context_tokens.toLocaleString()} of ${u.context_window.toLocaleString()} tokens (${pct}%)`),
      el("div", {class: "meter", title: `${pct}%`}, el("div", {style: `width: ${Math.min(100, pct)}%`})),
      kv([["tokens used", `${u.total_tokens.toLocaleString()}${d.transcript && d.transcript.cut ? " (at least: transcript read from its tail)" : ""}`],
          ["input / output", `${u.input_tokens.toLocaleString()} / ${u.output_tokens.toLocaleString()}`],
          ["cache write / read", `${u.cache_creation_input_tokens.toLocaleString()} / ${u.cache_read_input_tokens.toLocaleString()}`],
          ["turns", u.turns], ["model", u.model]]));
  } else usage.append(el("span", {class: "none"}, d.card.local ? "no usage in the transcript yet" : "not known for another host's session"));
  // Each request and who answered it: a paired device's name, "host NAME", or the owner (never a name the
  // answer's body gave: that is its note).
  const asked = document.getElementById("p-approvals");
  asked.textContent = "";
  if ((d.approvals || []).length) {
    asked.append(el("table", {}, el("tr", {}, el("th", {}, "asked"), el("th", {}, "kind"), el("th", {}, "request"),
        el("th", {}, "state"), el("th", {}, "answered by"), el("th", {}, "via"), el("th", {}, "note")),
      d.approvals.map((a) => {
        const ans = a.answer || {};
        const what = a.tool_input && (a.tool_input.command || a.tool_input.file_path) || "";
        return el("tr", {class: "approval-row", data: {id: a.id}}, el("td", {}, clock(a.created_at)), el("td", {}, a.kind),
          el("td", {class: "cmd", title: String(what)}, clip(`${a.tool_name}${what ? ": " + what : ""}`, 120)),
          el("td", {}, a.state), el("td", {class: "answered-by"}, ans.by || "-"), el("td", {}, ans.via || ""),
          el("td", {}, ans.note || ""));
      })));
  } else asked.append(el("span", {class: "none"}, "no requests"));
  const acted = document.getElementById("p-actions");
  acted.textContent = "";
  if ((d.actions || []).length) {
    acted.append(el("table", {}, el("tr", {}, el("th", {}, "time"), el("th", {}, "what"), el("th", {}, "who"), el("th", {}, "note")),
      d.actions.map((x) => el("tr", {}, el("td", {}, clock(x.at)), el("td", {}, x.action),
        el("td", {}, x.by_name), el("td", {}, clip(x.note || "", 120))))));
  } else acted.append(el("span", {class: "none"}, "no answers, replies or cancels yet"));
  const calls = document.getElementById("p-calls");
  calls.textContent = "";
  if (d.tool_calls.length) {
    calls.append(el("table", {}, el("tr", {}, el("th", {}, "time"), el("th", {}, "tool"), el("th", {}, "command"), el("th", {}, "guard"), el("th", {}, "outcome"), el("th", {}, "rule / reason")),
      d.tool_calls.map((c) => el("tr", {},
        el("td", {}, clock(c.started_at)), el("td", {}, c.tool_name),
        el("td", {class: "cmd", title: c.command || ""}, clip(c.command, 160)),
        el("td", {class: c.decision || ""}, c.decision || "-"),
        el("td", {}, c.outcome + (c.duration_ms != null ? ` ${c.duration_ms} ms` : "")),
        el("td", {}, [c.rule, c.reason].filter(Boolean).join(": ") || c.error || "")))));
  } else if (!d.card.local && d.events.length) {
    calls.append(el("span", {class: "none"}, "another host's session: its events are under State history"));
  } else calls.append(el("span", {class: "none"}, "no tool calls"));
  document.getElementById("p-summary").textContent = d.summary ? d.summary.text : "(no summary yet: one is written at each Stop)";
  const events = document.getElementById("p-events");
  events.textContent = "";
  if (d.events.length) {
    const named = (s) => STATE_LABELS[s] || s;
    events.append(el("table", {}, el("tr", {}, el("th", {}, "time"), el("th", {}, "what happened"), el("th", {}, "state"), el("th", {}, "from"), el("th", {}, "detail")),
      d.events.map((e) => el("tr", {}, el("td", {}, clock(e.at)), el("td", {title: e.event}, EVENT_WORDS[e.event] || e.event),
        el("td", {}, e.to ? `${named(e.from)} → ${named(e.to)}` : `${named(e.from)} (no change)`), el("td", {}, e.source), el("td", {}, e.metadata || "")))));
  } else events.append(el("span", {class: "none"}, "no events"));
}

async function act(kind) {
  const id = board.open;
  const card = board.cards.get(id);
  const msg = document.getElementById("p-msg");
  const reason = document.getElementById("p-reason").value.trim();
  msg.className = "msg";
  let r;
  if (kind === "cancel" || kind === "cancel-task") {
    if (!reason) { msg.className = "msg err"; msg.textContent = "Give a reason: the agent reads it."; return; }
    r = kind === "cancel"
      ? await api("POST", `/api/sessions/${encodeURIComponent(id)}/cancel`, {reason})
      : await api("POST", `/api/tasks/${encodeURIComponent(card.task_id)}/cancel`, {reason});
  } else if (kind === "uncancel") {
    r = card && card.badges.cancelled_by === "task"
      ? await api("POST", `/api/tasks/${encodeURIComponent(card.task_id)}/uncancel`, {})
      : await api("POST", `/api/sessions/${encodeURIComponent(id)}/uncancel`, {});
  } else if (kind === "delete") {
    if (!confirm("Delete this card? (A local session's own records stay in the store.)")) return;
    r = await api("DELETE", `/api/hooks/sessions/${encodeURIComponent(id)}`);
    if (r.ok) { closePanel(); toast("card deleted"); return; }
  }
  if (!r.ok) { msg.className = "msg err"; msg.textContent = r.doc.error || `HTTP ${r.status}`; return; }
  const where = (r.doc.sessions || []).map((s) => s.applied === "sent" ? `sent to ${s.host}` : s.applied).join(", ");
  msg.textContent = `${kind.replace("-", " ")}: done${where ? " (" + where + ")" : ""}`;
  loadPanel(id);
}

// -- "Needs you": every pending request of the fleet, oldest first ------------------------------

function left(ts) {
  if (!ts) return "no time limit";
  const s = Math.round(ts - Date.now() / 1000);
  if (s <= 0) return "time is up";
  return s < 60 ? `${s}s left` : `${Math.floor(s / 60)}m ${s % 60}s left`;
}

function cardFor(a) {
  if (a.card && board.cards.has(a.card)) return board.cards.get(a.card);
  for (const c of board.cards.values()) if (c.host === a.host && c.session_id === a.session_id) return c;
  return board.cards.get(a.session_id) || null;
}

// Sessions past board.max_sessions, not on the board (the command center says how many).
function setCardsLeftOut(n) {
  const node = document.getElementById("cards-left");
  node.textContent = n ? `${n} more session${n === 1 ? "" : "s"} not shown (board.max_sessions)` : "";
  node.hidden = !n;
}

// How many of each host's requests the command center's limits keep out of the list ({host: n}).
function setLeftOut(leftOut) {
  const node = document.getElementById("needs-left");
  const parts = Object.entries(leftOut || {}).filter(([, n]) => n > 0).map(([h, n]) => `${n} of ${h}`);
  node.textContent = parts.length ? `not listed: ${parts.join(", ")} (the center's limits)` : "";
  node.hidden = !parts.length;
}

function setApprovals(list, leftOut) {
  if (leftOut !== undefined) setLeftOut(leftOut);
  const fresh = (list || []).filter((a) => a.state === "pending")
    .sort((x, y) => (x.created_at || 0) - (y.created_at || 0));
  const arrived = fresh.filter((a) => !board.seenApprovals.has(a.id));
  for (const a of fresh) board.seenApprovals.add(a.id);
  board.approvals = fresh;
  if (!fresh.some((a) => a.id === board.selected)) board.selected = fresh.length ? fresh[0].id : null;
  if (board.target && !fresh.some((a) => a.id === board.target)) {  // the linked request was answered: the link is done
    board.target = null;
    if (requestInHash()) history.replaceState(null, "", location.pathname);
  }
  renderNeeds();
  if (board.wanted && fresh.some((a) => a.id === board.wanted)) openRequest(board.wanted);
  if (arrived.length && board.metaLoaded) notifyArrivals(arrived);
}

function notifyArrivals(list) {
  if (!document.getElementById("needs-notify").checked) return;
  if (board.notify.mode === "push") return;  // the push for it reaches this device anyway: not twice
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  for (const a of list) {
    try { new Notification(`Needs you: ${a.host}`, {body: clip(askText(a), 180), tag: a.id}); } catch (e) { /* not allowed here */ }
  }
}

// What is asked, on one line: the command, the file, the question.
function askText(a) {
  const i = a.tool_input || {};
  if (a.kind === "question") return (a.questions || []).map((q) => q.question).join(" / ");
  return `${a.tool_name}: ${i.command || i.file_path || i.url || i.pattern || i.path || JSON.stringify(i)}`;
}

// The exact command, file path or diff, clipped; always as text.
function askDetail(a) {
  const i = a.tool_input || {};
  if (a.kind === "question") return null;
  if (typeof i.command === "string") return el("pre", {class: "ask cmd"}, clip(i.command, 2000));
  const parts = [];
  if (typeof i.file_path === "string") parts.push(el("div", {class: "ask path"}, i.file_path));
  if (typeof i.old_string === "string" || typeof i.new_string === "string") {
    parts.push(el("pre", {class: "ask diff"},
      clip(i.old_string || "", 1200).split("\n").map((l) => el("span", {class: "del"}, `- ${l}\n`)),
      clip(i.new_string || "", 1200).split("\n").map((l) => el("span", {class: "add"}, `+ ${l}\n`))));
  } else if (typeof i.content === "string") {
    parts.push(el("pre", {class: "ask diff"}, clip(i.content, 1500).split("\n").map((l) => el("span", {class: "add"}, `+ ${l}\n`))));
  } else if (!parts.length) {
    parts.push(el("pre", {class: "ask"}, clip(JSON.stringify(i, null, 1), 1500)));
  }
  return parts;
}

async function answer(a, body, node) {
  const r = await api("POST", `/api/approvals/${encodeURIComponent(a.id)}`, {...body, via: "board"});
  const status = node ? node.querySelector(".need-msg") : null;
  if (r.ok) {
    toast(`${body.decision === "deny" ? "denied" : "answered"}: ${clip(askText(a), 60)}${r.status === 202 ? " (sent to " + a.host + ")" : ""}`);
    board.approvals = board.approvals.filter((x) => x.id !== a.id);
    renderNeeds();
  } else if (r.status === 409) {
    toast(r.doc.error || "already answered");
    board.approvals = board.approvals.filter((x) => x.id !== a.id);
    renderNeeds();
  } else if (status) {
    status.className = "need-msg err";
    status.textContent = r.doc.error || `HTTP ${r.status}`;
  }
}

function needNode(a) {
  const card = cardFor(a);
  const who = [card && card.agent, card && card.task_id ? `task ${card.task_id}${card.task ? ": " + card.task : ""}` : null,
               card ? card.label : a.session_id.slice(0, 12)].filter(Boolean).join(" · ");
  const message = el("input", {type: "text", class: "deny-msg", maxlength: "4000", placeholder: "message for the model (deny)",
                               "aria-label": "deny message"});
  const stop = el("input", {type: "checkbox", class: "interrupt", "aria-label": "stop the turn"});
  const node = el("article", {class: "need" + (a.id === board.selected ? " selected" : "") + (a.id === board.target ? " target" : ""),
                              tabindex: "0", data: {id: a.id, kind: a.kind}});
  // A question: its options as buttons. One single-choice question is answered by a click; otherwise
  // the options are chosen (several for a multi-select one) and "Answer" sends every question's at once.
  const qs = a.kind === "question" ? (a.questions || []) : [];
  const chosen = qs.map(() => new Set());
  const frees = qs.map(() => el("input", {type: "text", class: "free", placeholder: "or another answer",
                                          "aria-label": "another answer"}));
  const oneClick = qs.length === 1 && !qs[0].multiSelect;
  const sendAnswers = () => {
    const answers = {};
    qs.forEach((q, i) => {
      const labels = [...chosen[i]];
      if (frees[i].value.trim()) labels.push(frees[i].value.trim());
      if (labels.length) answers[q.question] = q.multiSelect ? labels : labels[labels.length - 1];
    });
    if (Object.keys(answers).length < qs.length) {
      const status = node.querySelector(".need-msg");
      status.className = "need-msg err";
      status.textContent = "answer every question first";
      return;
    }
    answer(a, {decision: "allow", answers}, node);
  };
  const questions = qs.map((q, i) => el("div", {class: "question"},
    el("div", {class: "q"}, q.header ? el("b", {}, `${q.header}: `) : null, q.question,
      q.multiSelect ? el("span", {class: "multi"}, " (choose any)") : null),
    el("div", {class: "options"},
      (q.options || []).map((o) => el("button", {class: "option", title: o.description || "", onclick: (ev) => {
        if (oneClick) { answer(a, {decision: "allow", answers: {[q.question]: o.label}}, node); return; }
        if (!q.multiSelect) {
          chosen[i].clear();
          for (const b of ev.target.parentNode.querySelectorAll(".option")) b.classList.remove("chosen");
        }
        if (chosen[i].has(o.label)) { chosen[i].delete(o.label); ev.target.classList.remove("chosen"); }
        else { chosen[i].add(o.label); ev.target.classList.add("chosen"); }
      }}, o.label)),
      frees[i],
      oneClick ? el("button", {class: "option free-send", onclick: () => {
        if (frees[i].value.trim()) answer(a, {decision: "allow", answers: {[q.question]: frees[i].value.trim()}}, node);
      }}, "Answer") : null)));
  if (qs.length && !oneClick) questions.push(el("div", {class: "options"},
    el("button", {class: "allow answer-all", onclick: sendAnswers}, "Answer")));
  const always = (a.suggestions || []).length > 0;
  // Element.append would write an array as "[object ...]" and null as "null": flatten, keep what exists.
  node.append(...[
    el("div", {class: "need-row"},
      el("span", {class: `chip kind kind-${a.kind}`}, a.kind === "gate" && a.gate ? `gate ${a.gate}` : a.kind),
      el("span", {class: "chip host"}, a.host),
      el("span", {class: "need-who"}, who),
      el("span", {class: "sp"}),
      el("span", {class: "left", data: {expires: a.expires_at || ""}}, left(a.expires_at))),
    el("div", {class: "need-what"}, a.kind === "question" ? "asks:" : a.tool_name),
    askDetail(a),
    questions,
    el("div", {class: "need-actions"},
      a.kind !== "question" ? el("button", {class: "allow", onclick: () => answer(a, {decision: "allow"}, node)}, "Allow") : null,
      a.kind !== "question" ? el("button", {class: "always", disabled: always ? null : true,
        title: always ? "allow, and keep the client's own rule for next time" : "the client offered no rule to keep",
        onclick: () => answer(a, {decision: "allow_always"}, node)}, "Always allow") : null,
      message,
      el("label", {class: "stop", title: "deny, and stop the agent's turn"}, stop, "stop"),
      el("button", {class: "deny danger", onclick: () => answer(a, {decision: "deny", message: message.value.trim() || undefined,
                                                                      interrupt: stop.checked}, node)}, "Deny")),
    deliveries(a),
    el("div", {class: "need-msg", role: "status"}),
  ].flat().filter((x) => x !== null && x !== undefined && x !== false));
  node.addEventListener("click", () => { board.selected = a.id; markSelected(); });
  return node;
}

// Who was told about a request, per channel, in words: "sent to ntfy · retrying Slack".
const DELIVERY_WORDS = {sent: "sent to", delivered: "sent to", retrying: "retrying", failed: "could not reach",
                        queued: "sending to", pending: "sending to", sending: "sending to"};
function deliveries(a) {
  const list = Array.isArray(a.notifications) ? a.notifications.filter((n) => n && n.channel) : [];
  if (!list.length) return null;
  const parts = [];
  list.forEach((n, i) => {
    if (i) parts.push(" · ");
    const state = String(n.state || "");
    const title = [n.at ? clock(n.at) : null, n.error ? clip(n.error, 300) : null].filter(Boolean).join(": ");
    parts.push(el("span", {class: `delivery ${state.replace(/[^a-z_]/g, "")}`, title: title || null},
      `${DELIVERY_WORDS[state] || state} ${clip(n.channel, 60)}`));
  });
  return el("div", {class: "need-notes"}, parts);
}

function markSelected() {
  for (const n of document.querySelectorAll(".need")) n.classList.toggle("selected", n.dataset.id === board.selected);
}

function renderNeeds() {
  const box = document.getElementById("needs-list");
  const section = document.getElementById("needs");
  const active = document.activeElement;
  const typing = active && box.contains(active) && active.tagName === "INPUT"
    ? {id: active.closest(".need").dataset.id, cls: active.className, value: active.value} : null;
  box.textContent = "";
  for (const a of board.approvals) box.append(needNode(a));
  document.getElementById("needs-n").textContent = String(board.approvals.length);
  section.hidden = board.approvals.length === 0;
  if (typing) {  // a refresh must not eat what someone is typing
    const again = box.querySelector(`.need[data-id="${CSS.escape(typing.id)}"] input.${CSS.escape(typing.cls.split(" ")[0])}`);
    if (again) { again.value = typing.value; again.focus(); }
  }
}

function needsKeys(ev) {
  const t = ev.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
  if (ev.ctrlKey || ev.metaKey || ev.altKey || !board.approvals.length) return;
  const i = Math.max(0, board.approvals.findIndex((a) => a.id === board.selected));
  const a = board.approvals[i];
  const node = document.querySelector(`.need[data-id="${CSS.escape(a.id)}"]`);
  if (ev.key === "j" || ev.key === "k") {
    const next = board.approvals[Math.min(board.approvals.length - 1, Math.max(0, i + (ev.key === "j" ? 1 : -1)))];
    board.selected = next.id;
    markSelected();
    const n = document.querySelector(`.need[data-id="${CSS.escape(next.id)}"]`);
    if (n) n.scrollIntoView({block: "nearest"});
  } else if (ev.key === "a" && a.kind !== "question") {
    answer(a, {decision: "allow"}, node);
  } else if (ev.key === "d") {
    const msg = node ? node.querySelector(".deny-msg").value.trim() : "";
    answer(a, {decision: "deny", message: msg || undefined, interrupt: node ? node.querySelector(".interrupt").checked : false}, node);
  } else return;
  ev.preventDefault();
}

// -- a link to one request: <board>/#request=<id> -----------------------------------------------------------
// A push opens it; so may a link in any notification. The request is selected, scrolled to and marked, and the
// phone's list switches to its session's column. One that is no longer pending says so.

function requestInHash() {
  const m = location.hash.match(/^#request=(.+)$/);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (e) { return m[1]; }
}

function openRequest(id) {
  const a = board.approvals.find((x) => x.id === id);
  if (!a) return false;
  board.wanted = null;
  board.selected = id;
  board.target = id;
  const card = cardFor(a);
  if (card) { board.pick = columnOf(card); render(); }
  renderNeeds();
  const node = document.querySelector(`.need[data-id="${CSS.escape(id)}"]`);
  if (node) {
    node.scrollIntoView({block: "center"});
    node.focus({preventScroll: true});
  }
  return true;
}

function openFromHash() {
  const id = requestInHash();
  if (!id) return;
  if (openRequest(id)) return;
  board.wanted = id;  // it may still arrive (another host's, reported a moment later); until then, say so
  toast("That request is not waiting any more: it was answered, or its time ran out.");
}

// A push's click in a board that is already open (sw.js posts the request's address here).
function openFromUrl(url) {
  let u;
  try { u = new URL(url, location.href); } catch (e) { return; }
  if (u.origin !== location.origin) return;
  if (u.pathname !== location.pathname) { location.assign(u.href); return; }
  if (location.hash === u.hash) openFromHash();
  else location.hash = u.hash;  // hashchange opens it
}

// -- notify me: a Web Push to this device when the server offers one, else a notification while the tab is open --

function b64urlBytes(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - text.length % 4) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function sameKey(sub, key) {
  const have = sub.options && sub.options.applicationServerKey;
  if (!have) return false;
  const a = new Uint8Array(have);
  return a.length === key.length && a.every((x, i) => x === key[i]);
}

// The server's push key, or why there is none. Until the server sends Web Push, /api/push/key is not there (404).
async function pushKey() {
  let r;
  try { r = await fetch("/api/push/key", {headers: {Accept: "application/json"}}); } catch (e) { return {why: "the server did not answer"}; }
  if (r.status === 404) return {why: "this server does not send push notifications"};
  if (!r.ok) return {why: `the server's push key: HTTP ${r.status}`};
  let doc = null;
  try { doc = await r.json(); } catch (e) { doc = null; }
  if (!doc || typeof doc.public_key !== "string" || !doc.public_key) return {why: "the server offered no push key"};
  return {key: doc.public_key};
}

// Subscribe this device for Web Push: {ok: true}, or {why} in words.
async function subscribePush() {
  if (!window.isSecureContext) return {why: "push needs the board over https (or on this machine's own address)"};
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) return {why: "this browser has no Web Push"};
  const reg = await board.sw;
  if (!reg) return {why: `the board's service worker did not start${board.swError ? ": " + board.swError : ""}`};
  const got = await pushKey();
  if (!got.key) return {why: got.why};
  if (!("Notification" in window) || Notification.permission !== "granted") return {why: "notifications are blocked for this page (the browser's site settings)"};
  let key;
  try { key = b64urlBytes(got.key); } catch (e) { return {why: "the server's push key is not base64url"}; }
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub, key)) { await sub.unsubscribe(); sub = null; }  // the server made a new key
  if (!sub) {
    try { sub = await reg.pushManager.subscribe({userVisibleOnly: true, applicationServerKey: key}); }
    catch (e) { return {why: `the browser's push service refused: ${e.message || e}`}; }
  }
  const r = await api("POST", "/api/push/subscriptions", sub.toJSON());
  if (!r.ok) return {why: `the server did not keep the subscription: ${r.doc.error || "HTTP " + r.status}`};
  return {ok: true};
}

async function unsubscribePush() {
  if (!("serviceWorker" in navigator)) return;
  const reg = await board.sw;
  const sub = reg && reg.pushManager ? await reg.pushManager.getSubscription() : null;
  if (!sub) return;
  await api("DELETE", "/api/push/subscriptions", {endpoint: sub.endpoint});
  await sub.unsubscribe();
}

function setNotify(mode, text) {
  board.notify = {mode, why: text};
  const status = document.getElementById("notify-status");
  status.textContent = text;
  status.dataset.mode = mode;
  document.getElementById("notify-label").title = text || "a notification for each request that needs you";
}

// "Notify me" turned on (or found on at load: then nothing is asked, as a browser asks only after a click).
async function notifyOn(ask) {
  // Asked first, straight from the click: some browsers (Safari) allow the question only then.
  if (ask && "Notification" in window && Notification.permission === "default") await Notification.requestPermission();
  const push = await subscribePush();
  if (push.ok) { setNotify("push", "a push reaches this device for each request, even with the board closed"); return; }
  if (!("Notification" in window)) { setNotify("off", `no notifications: ${push.why}, and this browser has none in the page`); return; }
  if (Notification.permission !== "granted") { setNotify("off", `no notifications: ${push.why}; and notifications are blocked for this page`); return; }
  setNotify("tab", `only while this board is open: ${push.why}`);
}

async function notifyChanged(checkbox) {
  localStorage.setItem("needs-notify", checkbox.checked ? "1" : "0");
  if (checkbox.checked) {
    await notifyOn(true);
    toast(`Notify me: ${board.notify.why}`);
  } else {
    setNotify("off", "");
    try { await unsubscribePush(); } catch (e) { toast(`could not unsubscribe this device: ${e.message || e}`); }
  }
}

async function loadApprovals() {
  const r = await api("GET", "/api/approvals");
  if (r.ok && Array.isArray(r.doc.approvals)) setApprovals(r.doc.approvals, r.doc.left_out);
}

// -- start ----------------------------------------------------------------------------------

async function main() {
  const r = await api("GET", "/api/board");
  if (!r.ok) { setConn("down", r.doc.error || `HTTP ${r.status}`); return; }
  board.meta = r.doc;
  document.getElementById("host").textContent = r.doc.host;
  setGateway(r.doc.openclaw);
  buildColumns();
  board.cards = new Map(r.doc.cards.map((c) => [c.id, c]));
  if (r.doc.cost) board.cost = r.doc.cost;
  render();
  for (const key of ["host", "agent", "type", "task"]) {
    document.getElementById(`f-${key}`).addEventListener("change", (ev) => { board.filters[key] = ev.target.value; render(); });
  }
  document.getElementById("panel-close").addEventListener("click", closePanel);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && board.open) closePanel(); });
  document.getElementById("p-cancel").addEventListener("click", () => act("cancel"));
  document.getElementById("p-cancel-task").addEventListener("click", () => act("cancel-task"));
  document.getElementById("p-uncancel").addEventListener("click", () => act("uncancel"));
  document.getElementById("p-delete").addEventListener("click", () => act("delete"));
  setInterval(() => {
    for (const n of document.querySelectorAll(".when")) n.textContent = ago(Number(n.dataset.ts) || 0);
    for (const n of document.querySelectorAll(".need .left")) n.textContent = left(Number(n.dataset.expires) || 0);
  }, 1000);
  document.addEventListener("keydown", needsKeys);
  const notify = document.getElementById("needs-notify");
  notify.checked = localStorage.getItem("needs-notify") === "1";
  notify.addEventListener("change", () => notifyChanged(notify));
  if (notify.checked) notifyOn(false);
  document.getElementById("state-pick").addEventListener("change", (ev) => choosePick(ev.target.value));
  const menu = document.getElementById("menu-toggle");
  menu.addEventListener("click", () => {
    const open = !document.body.classList.contains("menu-open");
    document.body.classList.toggle("menu-open", open);
    menu.setAttribute("aria-expanded", open ? "true" : "false");
  });
  await loadApprovals();
  board.metaLoaded = true;
  const m = location.hash.match(/^#\/session\/(.+)$/);
  if (m) openPanel(decodeURIComponent(m[1]));
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
  connect();
}

// The service worker shows pushes and opens their request (sw.js). It caches nothing: the board and its API
// always come from the server.
function startServiceWorker() {
  if (!("serviceWorker" in navigator)) {
    board.swError = window.isSecureContext ? "this browser has none" : "a page over plain http gets none";
    board.sw = Promise.resolve(null);
    return;
  }
  let started = false;
  const late = new Promise((resolve) => setTimeout(() => {
    if (!started) board.swError = "it did not start within 10 s";
    resolve(null);
  }, 10000));
  board.sw = navigator.serviceWorker.register("/sw.js", {scope: "/"})
    .then(() => Promise.race([navigator.serviceWorker.ready.then((reg) => { started = true; return reg; }), late]))
    .catch((e) => { board.swError = e.message || String(e); return null; });
  navigator.serviceWorker.addEventListener("message", (ev) => {
    if (ev.data && ev.data.type === "open" && typeof ev.data.url === "string") openFromUrl(ev.data.url);
  });
}

startServiceWorker();

main();
