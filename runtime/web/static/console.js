// The console's only script: live actor pages (server-sent events) and filters that apply
// on change. The server renders and escapes every value; this inserts its HTML as is.
"use strict";

function liveActorPage() {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  let src = live.dataset.src;
  let source = null;
  const connect = () => {
    source = new EventSource(src);
    source.onopen = () => { live.className = "live on"; live.textContent = "live: watching the log"; };
    source.onerror = () => { live.className = "live off"; live.textContent = "live: reconnecting…"; };
    source.addEventListener("update", (e) => {
      const data = JSON.parse(e.data);
      document.getElementById("head").innerHTML = data.head;
      document.getElementById("timeline").innerHTML = data.timeline;
      live.dataset.fingerprint = data.fingerprint;
      // a reconnect picks up from what is shown
      src = src.replace(/seen=[^&]*/, "seen=" + encodeURIComponent(data.fingerprint));
      live.className = "live on";
      live.textContent = "live: updated " + new Date().toLocaleTimeString();
    });
    source.addEventListener("problem", (e) => {
      const data = JSON.parse(e.data);
      live.className = "live off";
      live.textContent = "live: stopped: " + data.message;
      source.close();
    });
  };
  connect();
  window.addEventListener("pagehide", () => source && source.close());
}

function autoFilters() {
  const form = document.getElementById("filters");
  if (!form) return;
  for (const el of form.querySelectorAll("select, input[type=checkbox]")) {
    el.addEventListener("change", () => form.submit());
  }
}

// a form with data-confirm asks first (delegated: the live updates redraw the forms)
function confirmForms() {
  document.addEventListener("submit", (e) => {
    const message = e.target.dataset && e.target.dataset.confirm;
    if (message && !window.confirm(message)) e.preventDefault();
  });
}

document.addEventListener("DOMContentLoaded", () => { liveActorPage(); autoFilters(); confirmForms(); });
