// Shared by every page: fetching the JSON routes, building elements and tables, polling.
"use strict";

const ui = (() => {
  const errorBox = () => document.getElementById("error");

  function showError(message) {
    const box = errorBox();
    box.textContent = message;
    box.classList.add("shown");
  }

  function clearError() {
    errorBox().classList.remove("shown");
  }

  // GET (or POST with {method: "POST"}) a JSON route; a failure is shown, not thrown away.
  async function api(path, options = {}) {
    let response;
    try {
      response = await fetch(path, { credentials: "same-origin", ...options });
    } catch (e) {
      showError(`hpcdet ui does not answer (${e.message}); is \`hpcdet ui\` still running?`);
      throw e;
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      showError(body.error || `${path}: HTTP ${response.status}`);
      throw new Error(body.error || String(response.status));
    }
    clearError();
    return body;
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "class") node.className = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A table of rows (arrays of cells: text or elements); a row may carry {cells, attrs}.
  function table(columns, rows, attrs = {}) {
    return el("table", attrs,
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, rows.map((r) => Array.isArray(r)
        ? el("tr", {}, r.map((c) => el("td", {}, c)))
        : el("tr", r.attrs, r.cells.map((c) => el("td", {}, c))))));
  }

  function replace(id, node) {
    const old = document.getElementById(id);
    node.id = id;
    old.replaceWith(node);
  }

  function when(seconds) {
    if (!seconds) return "";
    return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z";
  }

  function state(s) {
    return el("span", { class: `state state-${s}` }, s);
  }

  function progress(fraction) {
    const bar = el("span", { class: "bar", title: `${(fraction * 100).toFixed(1)}%` },
      el("span", {}));
    bar.firstChild.style.width = `${Math.round(Math.min(1, fraction) * 100)}%`;
    return el("span", {}, bar, ` ${(fraction * 100).toFixed(0)}%`);
  }

  function number(v) {
    if (v === null || v === undefined) return "";
    return typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(5) : String(v);
  }

  // Text as HTML shows it: a chart's tooltip formatter returns HTML, and hyperparameter and
  // metric names and values are the user's (or their code's) text.
  function html(v) {
    return String(v).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  // Call fn now and then every ms while it returns true (keep going) and the tab is shown.
  function poll(fn, ms) {
    let timer = null;
    const tick = async () => {
      let again = true;
      try {
        if (!document.hidden) again = await fn();
      } catch (e) {
        again = true;  // shown by api(); try again next time
      }
      if (again !== false) timer = setTimeout(tick, ms);
    };
    tick();
    return () => clearTimeout(timer);
  }

  // Buttons for what may be done to an experiment, each a POST the server checks.
  function actions(expId, onDone) {
    const act = (action, query = "") => async () => {
      const said = await api(`/api/experiments/${expId}/${action}${query}`, { method: "POST" });
      document.getElementById("said").textContent = said.said;
      if (onDone) onDone();
    };
    const priority = el("input", { type: "number", id: "priority-value", size: 4 });
    return el("div", { class: "controls", id: "actions" },
      ["pause", "activate", "cancel", "kill"].map((a) =>
        el("button", { onclick: act(a), "data-action": a }, a)),
      el("label", {}, "priority ", priority),
      el("button", { "data-action": "priority",
        onclick: () => act("priority", `?value=${encodeURIComponent(priority.value)}`)() },
      "set"),
      el("span", { id: "said", class: "muted" }));
  }

  const FINAL = new Set(["COMPLETED", "CANCELED", "ERROR", "DELETED"]);

  document.addEventListener("DOMContentLoaded", () => {
    const page = document.body.dataset.page;
    for (const a of document.querySelectorAll("header a[data-nav]")) {
      if (a.dataset.nav === page) a.classList.add("here");
    }
  });

  return { api, el, table, replace, when, state, progress, number, html, poll, actions,
    FINAL };
})();
