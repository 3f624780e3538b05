// Notebooks, shells and commands (as `hpcdet task list`); a running notebook opens behind the door.
"use strict";

(() => {
  const { api, el, table, replace, when, poll } = ui;
  const main = document.getElementById("main");
  main.append(el("h1", {}, "Tasks"),
    el("p", { class: "muted" },
      "Start them with hpcdet notebook start, hpcdet shell start or hpcdet cmd run."),
    el("table", { id: "tasks" }));

  poll(async () => {
    const tasks = await api("/api/tasks");
    replace("tasks", table(
      ["ID", "Kind", "State", "Description", "Job", "Exit code", "Started", "Ended", ""],
      tasks.map((t) => ({ attrs: { "data-task": t.id }, cells: [t.id, t.kind, t.state,
        t.description, t.job_id, t.exit_code === null ? "" : t.exit_code, when(t.started),
        when(t.ended), t.url ? el("a", { href: t.url, target: "_blank" }, "Open") : ""] }))));
    return true;
  }, 5000);
})();
