// The experiments: state, progress, best metric, labels; filtered in the page.
"use strict";

(() => {
  const { api, el, table, replace, when, state, progress, number, poll } = ui;
  const main = document.getElementById("main");
  const filters = { state: "", label: "", text: "", archived: false };
  let rows = [];

  const input = (key, attrs) => el("input", { ...attrs, id: `filter-${key}`, oninput: (e) => {
    filters[key] = e.target.type === "checkbox" ? e.target.checked : e.target.value;
    render();
  } });
  main.append(
    el("h1", {}, "Experiments"),
    el("div", { class: "controls" },
      el("label", {}, "state ", el("select", { id: "filter-state", onchange: (e) => {
        filters.state = e.target.value; render();
      } }, ["", "ACTIVE", "PAUSED", "COMPLETED", "CANCELED", "ERROR"].map((s) =>
        el("option", { value: s }, s || "any")))),
      el("label", {}, "label ", input("label", { type: "text", size: 10 })),
      el("label", {}, "name ", input("text", { type: "search", size: 14 })),
      el("label", {}, input("archived", { type: "checkbox" }), " archived too")),
    el("table", { id: "experiments" }));

  function keep(r) {
    if (r.archived && !filters.archived) return false;
    if (filters.state && r.state !== filters.state) return false;
    if (filters.label && !r.labels.some((l) => l.includes(filters.label))) return false;
    const text = filters.text.toLowerCase();
    return !text || r.name.toLowerCase().includes(text) || String(r.id) === text;
  }

  function render() {
    const shown = rows.filter(keep).sort((a, b) => b.id - a.id);
    replace("experiments", table(
      ["ID", "Name", "State", "Progress", "Best", "Searcher", "Labels", "Started", "Ended"],
      shown.map((r) => ({ attrs: { "data-id": r.id }, cells: [
        el("a", { href: `/experiments/${r.id}` }, r.id), r.name, state(r.state),
        progress(r.progress),
        r.best ? `${r.best.metric} ${number(r.best.value)} (trial ${r.best.trial_id})` : "",
        r.searcher, r.labels.join(", "), when(r.started), when(r.ended)] }))));
  }

  poll(async () => {
    rows = await api("/api/experiments");
    render();
    return true;
  }, 5000);
})();
