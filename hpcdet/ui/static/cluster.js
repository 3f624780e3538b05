// The cluster: the backend in use and what its scheduler reports of partitions and limits.
"use strict";

(() => {
  const { api, el, table, replace, poll } = ui;
  const main = document.getElementById("main");
  main.append(el("h1", {}, "Cluster"), el("p", { id: "backend" }), el("table", { id: "cluster" }));

  poll(async () => {
    const c = await api("/api/cluster");
    document.getElementById("backend").textContent = c.problem
      ? `backend ${c.backend}: the scheduler did not answer (${c.problem})`
      : `backend ${c.backend}`;
    replace("cluster", table(["What", "The scheduler reports"], c.reported));
    return true;
  }, 15000);
})();
