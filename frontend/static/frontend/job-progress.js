/* Keeps <progress data-job="ID"> bars (and <span data-job-text="ID">, and the job page's <p data-job-state="ID">) up to date by polling
   GET /api/jobs/ID/ (staff session). An element with data-reload-when-done="ID" (rendered while the
   job was still running) reloads the page once that job has ended, so the page shows the result. */
(function () {
  "use strict";
  var TERMINAL = { succeeded: true, failed: true, cancelled: true };
  var INTERVAL_MS = 1500;

  function jobIds() {
    var ids = {};
    document.querySelectorAll("progress[data-job]").forEach(function (el) { ids[el.dataset.job] = true; });
    return Object.keys(ids);
  }

  // the job page's sentence about the job (jobs/widgets.py's state_text says the same on first render)
  function stateText(p, percent) {
    switch (p.status) {
      case "pending": return "Waiting for a worker\u2026 this page updates by itself.";
      case "running": return "Running: " + percent + "% done" + (p.stage ? " (" + p.stage + ")" : "") + ". This page updates by itself.";
      case "succeeded": return "Finished.";
      case "failed": return "The job failed.";
      case "cancelled": return "The job was cancelled.";
      default: return p.status + ".";
    }
  }

  function update(id, p) {
    var percent = Math.round(100 * (p.fraction || 0));
    document.querySelectorAll('progress[data-job="' + id + '"]').forEach(function (el) { el.value = percent; });
    document.querySelectorAll('[data-job-text="' + id + '"]').forEach(function (el) {
      // the same words as jobs/widgets.py's progress_text: status, percentage, the stage a running job names
      el.textContent = p.status + " " + percent + "%" + (p.stage ? " — " + p.stage : "") + (p.error ? " — " + p.error : "");
    });
    document.querySelectorAll('[data-job-state="' + id + '"]').forEach(function (el) { el.textContent = stateText(p, percent); });
  }

  function poll(id) {
    fetch("/api/jobs/" + encodeURIComponent(id) + "/", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (p) {
        update(id, p);
        if (TERMINAL[p.status]) {
          if (document.querySelector('[data-reload-when-done="' + id + '"]')) { window.location.reload(); }
          return;
        }
        window.setTimeout(function () { poll(id); }, INTERVAL_MS);
      })
      .catch(function () { window.setTimeout(function () { poll(id); }, 4 * INTERVAL_MS); });
  }

  function start() { jobIds().forEach(function (id) { poll(id); }); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
