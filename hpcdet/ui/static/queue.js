// hpcdet's jobs in the order they would start (as `hpcdet job list`), with pending reasons.
"use strict";

(() => {
  const { api, el, table, replace, when, poll } = ui;
  const main = document.getElementById("main");
  main.append(el("h1", {}, "Job queue"),
    el("p", { class: "muted", id: "queue-problem" }),
    el("table", { id: "queue" }));

  poll(async () => {
    const q = await api("/api/queue");
    document.getElementById("queue-problem").textContent =
      q.problem ? `The scheduler did not answer (${q.problem}); showing stored states.` : "";
    replace("queue", table(
      ["#", "ID", "Job name", "Priority", "Submitted", "Slots (acquired/needed)", "State",
        "Why pending", "Expected start", "Partitions", "Scheduler jobs"],
      q.jobs.map((j, i) => ({ attrs: { "data-job": j.job_id }, cells: [i,
        el("a", { href: `/experiments/${j.job_id}` }, j.job_id), j.name, j.priority,
        when(j.submitted), `${j.acquired}/${j.needed}`, j.state, j.reason,
        when(j.expected_start), j.partitions.join(", "), j.scheduler_ids.join(", ")] }))));
    return true;
  }, 5000);
})();
