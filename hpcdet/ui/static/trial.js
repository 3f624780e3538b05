// One trial: its state and hyperparameters, its metrics, checkpoints, and logs filtered by
// rank and level, followed while it runs.
"use strict";

(() => {
  const { api, el, table, replace, when, state, number, poll, FINAL } = ui;
  const trialId = Number(location.pathname.split("/").pop());
  const main = document.getElementById("main");
  const logView = { ranks: "", level: "", follow: true, cursor: {}, lines: [] };
  let trial = null;
  let chart = null;
  let chartMetric = "";

  main.append(
    el("h1", { id: "title" }, `Trial ${trialId}`),
    el("dl", { class: "facts", id: "facts" }),
    el("h2", {}, "Hyperparameters"), el("table", { id: "hparams" }),
    el("h2", {}, "Metrics"),
    el("div", { class: "controls" }, el("label", {}, "metric ",
      el("select", { id: "trial-metric", onchange: (e) => { chartMetric = e.target.value; loadMetrics(); } }))),
    el("div", { class: "chart", id: "trial-curves" }),
    el("h2", {}, "Checkpoints"), el("table", { id: "checkpoints" }),
    el("h2", {}, "Logs"),
    el("div", { class: "controls" },
      el("label", {}, "ranks ", el("input", { id: "log-ranks", size: 6, placeholder: "0,1",
        onchange: (e) => { logView.ranks = e.target.value; restartLogs(); } })),
      el("label", {}, "level at least ", el("select", { id: "log-level",
        onchange: (e) => { logView.level = e.target.value; restartLogs(); } },
      ["", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"].map((l) => el("option", { value: l }, l || "any")))),
      el("label", {}, el("input", { type: "checkbox", id: "log-follow", checked: true,
        onchange: (e) => { logView.follow = e.target.checked; } }), " follow"),
      el("span", { id: "log-omitted", class: "muted" })),
    el("pre", { class: "logs", id: "logs" }));
  chart = echarts.init(document.getElementById("trial-curves"));
  window.addEventListener("resize", () => chart.resize());

  function render() {
    document.title = `Trial ${trial.id} · hpcdet`;
    document.getElementById("title").replaceChildren(`Trial ${trial.id} of `,
      el("a", { href: `/experiments/${trial.experiment_id}` }, `experiment ${trial.experiment_id}`));
    const facts = [["state", state(trial.state)], ["status", trial.status || ""],
      ["steps completed", trial.steps_completed], ["best validation", number(trial.best_validation)],
      ["restarts", trial.restarts], ["started", when(trial.started)], ["ended", when(trial.ended)],
      ["end reason", trial.end_reason || ""], ["metadata", JSON.stringify(trial.metadata)],
      ["used", `${trial.usage.hours.toFixed(2)} ${trial.usage.unit}` +
        (trial.usage.sources.length ? ` (from ${trial.usage.sources.join(", ")})` : "")],
      ["idle GPUs", trial.idle_gpus.map((g) => `GPU ${g.index} on ${g.host} ${g.until ? "was " : ""}idle since ${when(g.idle_since)}`).join("; ")],
      ["alerts", trial.alerts.map((a) => `${a.level}: ${a.title}${a.description ? ` (${a.description})` : ""}`).join("; ")],
      ["runs", trial.runs.map((r) => `${r.run_id}: ${r.state}${r.job_id ? ` (job ${r.job_id})` : ""}`).join("; ")]];
    replace("facts", el("dl", { class: "facts" },
      facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)])));
    replace("hparams", table(["Name", "Value"],
      Object.entries(trial.hparams).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : String(v)])));
    const names = [...new Set(Object.values(trial.metric_names).flat())];
    if (!names.includes(chartMetric)) chartMetric = names[0] || "";
    document.getElementById("trial-metric").replaceChildren(
      ...names.map((n) => el("option", { value: n, selected: n === chartMetric }, n)));
  }

  async function loadMetrics() {
    if (!chartMetric) return;
    const curves = await api(`/api/trials/${trialId}/curves?metric=${encodeURIComponent(chartMetric)}`);
    chart.setOption({
      tooltip: { trigger: "axis" }, legend: { top: 0 },
      grid: { left: 60, right: 20, top: 40, bottom: 40 },
      xAxis: { type: "value", name: "batches", nameLocation: "middle", nameGap: 25 },
      yAxis: { type: "value", name: chartMetric, scale: true },
      series: Object.entries(curves).map(([group, c]) => ({
        name: group, type: "line", animation: false, showSymbol: c.steps.length < 40,
        data: c.steps.map((s, i) => [s, c.values[i]]) })),
    }, { replaceMerge: ["series"] });
  }

  async function loadCheckpoints() {
    const found = await api(`/api/trials/${trialId}/checkpoints`);
    replace("checkpoints", table(["UUID", "Steps", "State", "Metric", "Files", "Bytes", "Reported", "Metadata"],
      found.map((c) => [c.uuid, c.steps_completed, c.state, number(c.metric), c.files, c.size,
        when(c.reported), JSON.stringify(c.metadata)])));
  }

  function restartLogs() {
    logView.cursor = {};
    logView.lines = [];
    document.getElementById("logs").textContent = "";
    loadLogs();
  }

  async function loadLogs() {
    const query = new URLSearchParams({ cursor: JSON.stringify(logView.cursor) });
    if (logView.ranks) query.set("ranks", logView.ranks);
    if (logView.level) query.set("level", logView.level);
    const page = await api(`/api/trials/${trialId}/logs?${query}`);
    logView.cursor = page.cursor;
    if (page.skipped_bytes) {
      document.getElementById("log-omitted").textContent = `the log's first ` +
        `${(page.skipped_bytes / 2 ** 20).toFixed(1)} MiB not shown: hpcdet trial logs ${trialId}`;
    } else if (page.omitted) {
      document.getElementById("log-omitted").textContent =
        `${page.omitted} earlier lines not shown: hpcdet trial logs ${trialId}`;
    }
    if (!page.lines.length) return;
    const box = document.getElementById("logs");
    box.append(page.lines.map((l) => `${l.timestamp} [${l.node}] ${l.message}\n`).join(""));
    if (logView.follow) box.scrollTop = box.scrollHeight;
  }

  poll(async () => {
    const first = !trial;
    trial = await api(`/api/trials/${trialId}`);
    render();
    await Promise.all([loadMetrics(), loadCheckpoints(), loadLogs()]);
    return !(FINAL.has(trial.state) && !first);
  }, 3000);
})();
