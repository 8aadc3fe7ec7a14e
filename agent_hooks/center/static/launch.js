// "New session": start a Claude Code session on any host of the board (POST /api/sessions).
// Self-contained: its button, its dialog and these functions; it uses board.js's el() and api().
// The host decides what it runs (its [launch] roots, client and permission modes); the form only
// offers what each host said it allows (GET /api/launch). Every text from the server is set as text.
"use strict";

const launcher = {hosts: [], dialog: null};

// A launched card's start, as a badge: starting (its host has not said, or its session not been heard
// from yet), or refused with the host's reason.
function launchBadge(card) {
  const l = card.launch;
  if (!l) return null;
  if (l.state === "starting") return el("span", {class: "badge launching", title: "launched from the command center"}, "starting…");
  if (l.state === "refused") return el("span", {class: "badge launch-refused", title: l.error || ""}, "launch refused");
  return null;
}

function launchRefusal(card) {
  const l = card.launch;
  return l && l.state === "refused" && l.error ? el("div", {class: "launch-why"}, clip(l.error, 200)) : null;
}

function launchField(label, control, hint) {
  return el("label", {class: "lf"}, el("span", {}, label), control, hint ? el("small", {}, hint) : null);
}

function buildLaunchDialog() {
  const f = {
    host: el("select", {name: "host", required: true}),
    root: el("select", {name: "root"}),
    sub: el("input", {name: "sub", type: "text", placeholder: "subdirectory (optional)", autocomplete: "off"}),
    cwd: el("input", {name: "cwd", type: "text", placeholder: "/absolute/directory", autocomplete: "off"}),
    task: el("input", {name: "task_id", type: "text", placeholder: "T-42", autocomplete: "off", maxlength: "200"}),
    agent: el("input", {name: "agent", type: "text", placeholder: "builder", autocomplete: "off", maxlength: "80"}),
    label: el("input", {name: "label", type: "text", placeholder: "fix-login (tmux: agent-fix-login)", autocomplete: "off", maxlength: "120"}),
    mode: el("select", {name: "permission_mode"}),
    prompt: el("textarea", {name: "prompt", rows: "4", required: true, maxlength: "20000", placeholder: "what the session should do"}),
    msg: el("div", {class: "launch-msg", role: "status"}),
    go: el("button", {type: "submit", class: "primary"}, "Start"),
  };
  const dirOne = launchField("Directory", f.root);
  const dirSub = launchField("Subdirectory", f.sub, "inside the directory above");
  const dirFree = launchField("Directory", f.cwd, "this host has not said its roots: it checks the path itself");
  const form = el("form", {class: "launch-form", method: "dialog"},
    el("h2", {}, "New session"),
    launchField("Host", f.host),
    dirOne, dirSub, dirFree,
    el("div", {class: "lrow"}, launchField("Task", f.task), launchField("Agent", f.agent)),
    el("div", {class: "lrow"}, launchField("Label", f.label), launchField("Permission mode", f.mode)),
    launchField("Prompt", f.prompt),
    f.msg,
    el("div", {class: "launch-buttons"},
      el("button", {type: "button", class: "ghost", onclick: () => dialog.close()}, "Close"), f.go));
  const dialog = el("dialog", {id: "launch-dialog", class: "launch-dialog", "aria-label": "new session"}, form);
  launcher.f = f;

  const showHost = () => {
    const h = launcher.hosts.find((x) => x.host === f.host.value);
    const roots = h && Array.isArray(h.roots) ? h.roots : null;
    f.root.textContent = "";
    for (const r of roots || []) f.root.append(el("option", {value: r}, r));
    dirOne.hidden = dirSub.hidden = roots === null;
    dirFree.hidden = roots !== null;
    f.mode.textContent = "";
    const modes = h && Array.isArray(h.permission_modes) ? h.permission_modes : (board.launchModes || []);
    for (const m of modes) f.mode.append(el("option", {value: m, selected: h && m === h.default_mode}, m));
    const off = roots !== null && roots.length === 0;
    f.go.disabled = off;
    f.msg.className = "launch-msg";
    f.msg.textContent = off ? `launching is off on ${h.host}: its [launch] roots names no directory` : "";
  };
  f.host.addEventListener("change", showHost);
  launcher.showHost = showHost;

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const h = launcher.hosts.find((x) => x.host === f.host.value);
    let cwd = f.cwd.value.trim();
    if (h && Array.isArray(h.roots)) {
      const sub = f.sub.value.trim().replace(/^\/+/, "");
      cwd = f.root.value + (sub ? "/" + sub : "");
    }
    const body = {host: f.host.value, cwd, prompt: f.prompt.value};
    for (const [k, input] of [["task_id", f.task], ["agent", f.agent], ["label", f.label], ["permission_mode", f.mode]]) {
      if (input.value.trim()) body[k] = input.value.trim();
    }
    f.go.disabled = true;
    f.msg.className = "launch-msg";
    f.msg.textContent = `starting on ${body.host}…`;
    const r = await api("POST", "/api/sessions", body);
    f.go.disabled = false;
    if (r.status === 201) {
      f.msg.className = "launch-msg ok";
      f.msg.textContent = `started: tmux ${r.doc.tmux_session} on ${r.doc.host}`;
      f.prompt.value = "";
      setTimeout(() => { if (dialog.open) dialog.close(); showLaunched(r.doc.id); }, 800);
    } else if (r.status === 202) {
      f.msg.className = "launch-msg";
      f.msg.textContent = `sent to ${r.doc.host}; it has not said yet (its card shows what it says)`;
    } else {
      f.msg.className = "launch-msg err";
      f.msg.textContent = r.doc.error || `HTTP ${r.status}`;
      if (r.doc.id) showLaunched(r.doc.id);  // a refused launch keeps its card, saying why
    }
  });
  document.body.append(dialog);
  return dialog;
}

// The launched card in view: on a phone the list switches to its column (board.js: columnOf, choosePick).
// Its card comes over the live connection, maybe a moment after the answer: looked for during 3 s.
function showLaunched(id, tries = 30) {
  const card = id && board.cards.get(id);
  if (!card) {
    if (id && tries > 0) setTimeout(() => showLaunched(id, tries - 1), 100);
    return;
  }
  if (typeof choosePick === "function" && typeof columnOf === "function") choosePick(columnOf(card));
  if (typeof flash === "function") flash(id);
}

async function openLaunch() {
  if (!launcher.dialog) launcher.dialog = buildLaunchDialog();
  const f = launcher.f;
  const r = await api("GET", "/api/launch");
  if (!r.ok) { toast(r.doc.error || `HTTP ${r.status}`); return; }
  launcher.hosts = r.doc.hosts || [];
  board.launchModes = r.doc.modes || [];
  const keep = f.host.value;
  f.host.textContent = "";
  for (const h of launcher.hosts) {
    const off = Array.isArray(h.roots) && h.roots.length === 0;
    f.host.append(el("option", {value: h.host, selected: h.host === keep}, h.host + (h.here ? " (this host)" : "") + (off ? " (launching off)" : "")));
  }
  launcher.showHost();
  if (typeof launcher.dialog.showModal === "function") launcher.dialog.showModal(); else launcher.dialog.setAttribute("open", "");
  f.prompt.focus();
}

(function addLaunchButton() {
  const top = document.querySelector("header.top");
  if (!top) return;
  const button = el("button", {id: "new-session", class: "new-session", type: "button", title: "start a Claude Code session on a host"}, "New session");
  button.addEventListener("click", openLaunch);
  top.append(button);
})();
