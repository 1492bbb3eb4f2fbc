/* The admin's generate form (generation/templates/admin/generation/corpus/generate.html): shows the group of
   settings of the mode the "diverse" box picks (fieldset[data-group=constraints] or [data-group=diverse]) and
   hides and disables the other, so that its values are not posted (a setting of the other mode is refused by
   the server: generation.web.forms, the job's own rule); and shows the model's box only when the picker says
   "another model". Without this script every group shows and the server's checks still hold. */
(function () {
  "use strict";

  function setGroup(group, on) {
    group.hidden = !on;
    group.querySelectorAll("input, select, textarea").forEach(function (el) { el.disabled = !on; });
  }

  function start() {
    var form = document.querySelector("form.generate-form");
    if (!form) { return; }
    var diverse = form.querySelector('input[name="diverse"]');
    var constraints = form.querySelector('fieldset[data-group="constraints"]');
    var sampling = form.querySelector('fieldset[data-group="diverse"]');
    function mode() {
      if (!diverse) { return; }
      if (constraints) { setGroup(constraints, !diverse.checked); }
      if (sampling) { setGroup(sampling, diverse.checked); }
      form.dataset.mode = diverse.checked ? "diverse" : "constraints";
    }
    var pick = form.querySelector("select.model-pick");
    var path = form.querySelector("input.model-path");
    function model() {
      if (!pick || !path) { return; }
      var other = pick.value === "";
      path.hidden = !other;
      path.disabled = !other;
    }
    if (diverse) { diverse.addEventListener("change", mode); }
    if (pick) { pick.addEventListener("change", model); }
    mode();
    model();
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
