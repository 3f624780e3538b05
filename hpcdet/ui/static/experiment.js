// One experiment: its trials, metric curves, hyperparameters against a metric (scatter and
// parallel coordinates) and ASHA rungs; kept up to date while it trains.
"use strict";

(() => {
  const { api, el, table, replace, state, progress, number, html, poll, actions, FINAL } = ui;
  const expId = Number(location.pathname.split("/").pop());
  const main = document.getElementById("main");
  const view = { group: "", metric: "", log: false, chosen: null, hparam: "" };
  let exp = null;
  let curves = new Map();  // trial id -> {steps, values}
  const charts = {};

  main.append(
    el("h1", { id: "title" }, `Experiment ${expId}`),
    el("dl", { class: "facts", id: "facts" }),
    actions(expId, () => refresh()),
    el("h2", {}, "Metrics"),
    el("div", { class: "controls" },
      el("label", {}, "group ", el("select", { id: "group", onchange: (e) => {
        view.group = e.target.value; view.metric = ""; fillMetrics(); loadCurves();
      } })),
      el("label", {}, "metric ", el("select", { id: "metric", onchange: (e) => {
        view.metric = e.target.value; loadCurves();
      } })),
      el("label", {}, el("input", { type: "checkbox", id: "log-scale", onchange: (e) => {
        view.log = e.target.checked; drawCurves();
      } }), " log scale"),
      el("button", { id: "all-trials", onclick: () => { view.chosen = null; drawAll(); } },
        "all trials")),
    el("div", { class: "chart", id: "curves" }),
    el("div", { class: "grid2" },
      el("div", {}, el("h2", {}, "Hyperparameter against metric"),
        el("div", { class: "controls" }, el("label", {}, "hyperparameter ",
          el("select", { id: "hparam", onchange: (e) => {
            view.hparam = e.target.value; drawScatter();
          } }))),
        el("div", { class: "chart", id: "scatter" })),
      el("div", {}, el("h2", {}, "Parallel coordinates"),
        el("div", { class: "controls muted" }, "each line a trial, last value of the metric"),
        el("div", { class: "chart", id: "parallel" }))),
    el("div", { id: "rungs-box", hidden: true }, el("h2", {}, "ASHA rungs"),
      el("div", { class: "chart", id: "rungs" })),
    el("h2", {}, "Trials"),
    el("p", { class: "muted" }, "Click a row to plot only the trials you pick."),
    el("table", { id: "trials" }));

  for (const id of ["curves", "scatter", "parallel", "rungs"]) {
    charts[id] = echarts.init(document.getElementById(id), null, { renderer: "canvas" });
  }
  window.addEventListener("resize", () => Object.values(charts).forEach((c) => c.resize()));

  const shown = () => exp.trials.filter((t) => !view.chosen || view.chosen.has(t.id));
  const last = (id) => {
    const c = curves.get(id);
    for (let i = c ? c.values.length - 1 : -1; i >= 0; i--) {
      if (c.values[i] !== null) return c.values[i];
    }
    return null;
  };
  const hparamNames = () => [...new Set(exp.trials.flatMap((t) => Object.keys(flat(t.hparams))))];

  function flat(hp, prefix = "") {
    const out = {};
    for (const [k, v] of Object.entries(hp || {})) {
      if (v && typeof v === "object" && !Array.isArray(v)) Object.assign(out, flat(v, `${prefix}${k}.`));
      else out[prefix + k] = v;
    }
    return out;
  }

  function fillGroups() {
    const groups = Object.keys(exp.metric_names);
    const select = document.getElementById("group");
    if (!view.group) {
      const metric = exp.searcher.metric;
      const has = (g) => (exp.metric_names[g] || []).includes(metric);
      view.group = (has("validation") && "validation") || groups.find(has) || groups[0] || "";
    }
    select.replaceChildren(...groups.map((g) => el("option", { value: g, selected: g === view.group }, g)));
    fillMetrics();
  }

  function fillMetrics() {
    const names = exp.metric_names[view.group] || [];
    if (!names.includes(view.metric)) {
      view.metric = names.includes(exp.searcher.metric) ? exp.searcher.metric : names[0] || "";
    }
    document.getElementById("metric").replaceChildren(
      ...names.map((m) => el("option", { value: m, selected: m === view.metric }, m)));
  }

  function renderHeader() {
    const e = exp.experiment;
    document.title = `${e.name} (${e.id}) · hpcdet`;
    document.getElementById("title").textContent = `Experiment ${e.id}: ${e.name}`;
    const facts = [
      ["state", state(e.state)], ["progress", progress(e.progress || overall())],
      ["searcher", `${exp.searcher.name} on ${exp.searcher.metric}` +
        (exp.searcher.smaller_is_better === false ? " (larger is better)" : "")],
      ["best", exp.best ? `${number(exp.best.value)} (trial ${exp.best.trial_id})` : "none yet"],
      ["trials", String(exp.trials.length)], ["used", usedText(exp.usage)],
      ["labels", exp.labels.join(", ")],
      ["description", e.description || ""], ["priority", String(e.priority ?? "")]];
    if (e.advice) facts.push(["advice", e.advice]);
    replace("facts", el("dl", { class: "facts" },
      facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)])));
  }

  function usedText(u) {
    const from = u.sources.length ? ` (from ${u.sources.join(", ")})` : "";
    return `${u.hours.toFixed(2)} ${u.unit}${from}` + (u.running ? `; ${u.running} running` : "");
  }

  function overall() {
    if (!exp.trials.length) return 0;
    return exp.trials.reduce((s, t) => s + (t.state === "COMPLETED" ? 1 : t.progress), 0)
      / exp.trials.length;
  }

  function renderTrials() {
    const names = hparamNames();
    replace("trials", table(
      ["ID", "State", "Steps", "Best validation", `Last ${view.metric}`, "Restarts",
        "Searcher", ...names],
      exp.trials.map((t) => {
        const hp = flat(t.hparams);
        return { attrs: { "data-trial": t.id, class: view.chosen && view.chosen.has(t.id) ? "selected" : null,
          onclick: (ev) => { if (ev.target.tagName !== "A") choose(t.id); } },
        cells: [el("a", { href: `/trials/${t.id}` }, t.id), state(t.state), t.steps_completed,
          number(t.best_validation), number(last(t.id)), t.restarts, t.searcher,
          ...names.map((n) => number(hp[n]))] };
      })));
  }

  function choose(id) {
    view.chosen = view.chosen || new Set();
    if (view.chosen.has(id)) view.chosen.delete(id); else view.chosen.add(id);
    if (!view.chosen.size) view.chosen = null;
    drawAll();
  }

  function drawCurves() {
    const series = shown().filter((t) => curves.has(t.id)).map((t) => {
      const c = curves.get(t.id);
      return { name: `trial ${t.id}`, type: "line", showSymbol: c.steps.length < 40,
        sampling: "lttb", animation: false, data: c.steps.map((s, i) => [s, c.values[i]]) };
    });
    charts.curves.setOption({
      tooltip: { trigger: "axis" }, legend: { type: "scroll", top: 0 },
      grid: { left: 60, right: 20, top: 40, bottom: 40 },
      xAxis: { type: "value", name: "batches", nameLocation: "middle", nameGap: 25 },
      yAxis: { type: view.log ? "log" : "value", name: view.metric, scale: true },
      series }, { replaceMerge: ["series"] });
  }

  function drawScatter() {
    const names = hparamNames();
    if (!names.includes(view.hparam)) view.hparam = names[0] || "";
    document.getElementById("hparam").replaceChildren(
      ...names.map((n) => el("option", { value: n, selected: n === view.hparam }, n)));
    const points = shown().filter((t) => last(t.id) !== null)
      .map((t) => ({ value: [flat(t.hparams)[view.hparam], last(t.id)], name: `trial ${t.id}` }));
    const categorical = points.some((p) => typeof p.value[0] !== "number");
    charts.scatter.setOption({
      tooltip: { formatter: (p) => html(
        `${p.name}: ${view.hparam}=${p.value[0]}, ${view.metric}=${number(p.value[1])}`) },
      grid: { left: 60, right: 20, top: 20, bottom: 40 },
      xAxis: { type: categorical ? "category" : "value", name: view.hparam, scale: true,
        nameLocation: "middle", nameGap: 25 },
      yAxis: { type: "value", name: view.metric, scale: true },
      series: [{ type: "scatter", symbolSize: 9, data: points, animation: false }] },
    { replaceMerge: ["series", "xAxis"] });
  }

  function drawParallel() {
    const names = hparamNames();
    const trials = shown().filter((t) => last(t.id) !== null);
    const dims = [...names, view.metric];
    const axes = dims.map((name, dim) => {
      const values = trials.map((t) => (dim < names.length ? flat(t.hparams)[name] : last(t.id)));
      const categorical = values.some((v) => typeof v !== "number");
      return categorical
        ? { dim, name, type: "category", data: [...new Set(values.map(String))] }
        : { dim, name, scale: true };
    });
    const data = trials.map((t) => dims.map((n, i) => {
      const v = i < names.length ? flat(t.hparams)[n] : last(t.id);
      return axes[i].type === "category" ? String(v) : v;
    }));
    charts.parallel.setOption({
      parallelAxis: axes, parallel: { left: 40, right: 60, top: 40, bottom: 30 },
      series: [{ type: "parallel", data, lineStyle: { width: 1.5, opacity: 0.6 },
        animation: false }] }, { replaceMerge: ["series", "parallelAxis"] });
  }

  async function drawRungs() {
    if (exp.searcher.name !== "adaptive_asha") return;
    document.getElementById("rungs-box").hidden = false;
    charts.rungs.resize();
    const rungs = await api(`/api/experiments/${expId}/rungs`);
    const data = rungs.flatMap((r) => Object.entries(r.values)
      .map(([trial, value]) => ({ value: [String(r.length), value], name: `trial ${trial}` })));
    charts.rungs.setOption({
      tooltip: { formatter: (p) => html(`${p.name}: ${number(p.value[1])} at ${p.value[0]}`) },
      grid: { left: 60, right: 20, top: 20, bottom: 40 },
      xAxis: { type: "category", name: "rung", data: rungs.map((r) => String(r.length)),
        nameLocation: "middle", nameGap: 25 },
      yAxis: { type: "value", name: exp.searcher.metric, scale: true },
      series: [{ type: "scatter", data, symbolSize: 9, animation: false }] },
    { replaceMerge: ["series"] });
  }

  function drawAll() {
    renderTrials();
    drawCurves();
    drawScatter();
    drawParallel();
  }

  async function loadCurves(only) {
    if (!view.group || !view.metric) { drawAll(); return; }
    const query = new URLSearchParams({ group: view.group, metric: view.metric });
    if (only) query.set("trials", only.join(","));
    const found = await api(`/api/experiments/${expId}/curves?${query}`);
    if (!only) curves = new Map();
    for (const c of found) curves.set(c.trial_id, c);
    drawAll();
  }

  async function refresh() {
    const before = exp;
    exp = await api(`/api/experiments/${expId}`);
    renderHeader();
    if (!before) {
      fillGroups();
      await loadCurves();
      await drawRungs();
    } else {
      if (!Object.keys(before.metric_names).length) fillGroups();
      // Only trials still training have new points.
      const live = exp.trials.filter((t) => !FINAL.has(t.state) ||
        (before.trials.find((b) => b.id === t.id) || {}).state !== t.state).map((t) => t.id);
      if (live.length) await loadCurves(live); else drawAll();
      if (live.length) await drawRungs();
    }
    return !FINAL.has(exp.experiment.state);
  }

  poll(refresh, 3000);
})();
