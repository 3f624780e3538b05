// The cluster: the backend in use and what its scheduler reports of partitions and limits.
"use strict";

(() => {
  const { api, el, table, replace, poll } = ui;
  const main = document.getElementById("main");
  main.append(el("h1", {}, "Cluster"), el("p", { id: "daemon" }), el("p", { id: "backend" }),
              el("table", { id: "cluster" }));

  poll(async () => {
    const c = await api("/api/cluster");
    document.getElementById("backend").textContent = c.problem
      ? `backend ${c.backend}: the scheduler did not answer (${c.problem})`
      : `backend ${c.backend}`;
    const d = c.daemon;
    replace("daemon", el("p", { id: "daemon", class: d.warnings.length ? "warning" : "" },
      d.alive ? `daemon: running on ${d.where}` : "daemon: not running",
      ...d.warnings.map((w) => el("span", { class: "daemon-warning" }, ` — ${w}`))));
    replace("cluster", table(["What", "The scheduler reports"], c.reported));
    return true;
  }, 15000);
})();
