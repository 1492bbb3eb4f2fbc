// The HIT batch form (annotation/admin/batch_form.py BatchForm): show only the chosen provider's fieldsets, and say at once
// that a Preview or a Create is on its way. Without JavaScript every fieldset stays visible, and the server
// reads only the chosen provider's fields anyway.
(function () {
  "use strict";
  function toggle(form) {
    var select = form.querySelector("select[name=provider]");
    if (!select) return;
    var chosen = select.value;
    form.querySelectorAll("fieldset[data-providers]").forEach(function (fieldset) {
      fieldset.hidden = fieldset.dataset.providers.split(" ").indexOf(chosen) < 0;
    });
  }
  // Preview and Create wait for the server (sampling the HITs, screening their words, simulating the
  // reliability): say so at once, and keep a second click from sending the form twice.
  function working(form, event) {
    var button = event.submitter;
    var status = document.getElementById("batch-form-status");
    if (!status) return;
    status.textContent = button && button.name === "preview"
      ? "Working out the preview: sampling the HITs, screening their candidates' words and simulating the " +
        "reliability (seconds, longer the first time the server tokenizes this campaign; nothing is made)…"
      : "Creating the draft batch…";
    status.hidden = false;
    form.querySelectorAll("input[type=submit]").forEach(function (input) {
      if (input !== button) input.disabled = true;
    });
    if (button) {
      // a disabled submit button is not sent: keep the clicked one's name in the form, then block re-clicks
      var carried = document.createElement("input");
      carried.type = "hidden";
      carried.name = button.name;
      carried.value = button.value;
      carried.dataset.carried = "1";
      form.appendChild(carried);
      button.disabled = true;
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("batch-form");
    if (!form) return;
    toggle(form);
    form.querySelector("select[name=provider]").addEventListener("change", function () { toggle(form); });
    // the status line is made here, hidden, as a live region (without JavaScript nothing would fill it)
    var status = document.createElement("p");
    status.id = "batch-form-status";
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    status.hidden = true;
    var row = form.querySelector(".submit-row");
    row.parentNode.insertBefore(status, row);
    form.addEventListener("submit", function (event) { working(form, event); });
  });
  // coming back to the page (the browser's back button) shows the form ready again
  window.addEventListener("pageshow", function () {
    var status = document.getElementById("batch-form-status");
    if (status) status.hidden = true;
    document.querySelectorAll("#batch-form input[data-carried]").forEach(function (input) { input.remove(); });
    document.querySelectorAll("#batch-form input[type=submit]").forEach(function (input) { input.disabled = false; });
  });
})();
