// The board's service worker, served at /sw.js so that its scope is the whole board. It shows a Web Push the
// command center sends (a request that needs a person: {"title", "body", "url", "tag"}) and, on a click, opens
// that request on the board (<board>/#request=<id>), in a board already open if there is one.
// It caches nothing and has no fetch handler: the board's pages and API always come from the server.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

// The push's JSON; a push that is not JSON shows its text.
function payloadOf(event) {
  if (!event.data) return {};
  try {
    const doc = event.data.json();
    return doc && typeof doc === "object" ? doc : {body: String(doc)};
  } catch (e) {
    return {body: event.data.text()};
  }
}

// Only this board's own pages are opened: an address on another origin keeps just its #request=... here.
function boardUrl(url) {
  const origin = self.location.origin;
  try {
    const u = new URL(url || "/", origin);
    return u.origin === origin ? u.href : new URL("/" + u.hash, origin).href;
  } catch (e) {
    return new URL("/", origin).href;
  }
}

self.addEventListener("push", (event) => {
  const d = payloadOf(event);
  const tag = d.tag ? String(d.tag) : "";
  event.waitUntil(self.registration.showNotification(String(d.title || "Needs you"), {
    body: String(d.body || ""),
    tag: tag || undefined,
    renotify: Boolean(tag),  // sent again while unanswered: say so again
    requireInteraction: true,
    icon: "/icons/icon-192.png",
    data: {url: boardUrl(d.url)},
  }));
});

// Open `url` (a request on the board): tell an open board to show it and bring it forward, else open one.
async function openRequest(url) {
  const target = boardUrl(url);
  const windows = await self.clients.matchAll({type: "window", includeUncontrolled: true});
  const ours = windows.filter((w) => new URL(w.url).origin === self.location.origin);
  ours.sort((a, b) => Number(b.focused) - Number(a.focused) || (a.visibilityState === "visible" ? -1 : 1));
  if (ours.length) {
    const w = ours[0];
    w.postMessage({type: "open", url: target});
    try { await w.focus(); } catch (e) { /* focus is allowed only from a click on the notification */ }
    return w;
  }
  return self.clients.openWindow(target);
}
self.openRequest = openRequest;  // the browser tests call it: a test cannot click a notification

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(openRequest(event.notification.data && event.notification.data.url));
});
