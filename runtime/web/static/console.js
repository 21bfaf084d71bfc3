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
      const timeline = document.getElementById("timeline");
      if (data.reset) timeline.innerHTML = "";  // older news left out: from here on
      for (const item of data.items) {
        const t = document.createElement("template");
        t.innerHTML = item.html;
        const node = t.content.firstElementChild;
        if (!node) continue;
        // the update is the log's tail in order: an item sent again moves to its new place
        // (a step that finished after a recovery stands after it)
        const shown = timeline.querySelector('[data-key="' + CSS.escape(item.key) + '"]');
        if (shown) shown.remove();
        timeline.appendChild(node);
      }
      if (data.reset) document.getElementById("first-shown").textContent = data.since + 1;
      document.getElementById("last-shown").textContent = data.after;
      document.getElementById("log-end").textContent = data.after;
      // a reconnect continues from what is shown
      src = src.replace(/after=[^&]*/, "after=" + encodeURIComponent(data.after));
      live.className = data.problem ? "live off" : "live on";
      live.textContent = data.problem
        ? "live: " + data.status + ": " + data.problem
        : "live: updated " + new Date().toLocaleTimeString();
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
