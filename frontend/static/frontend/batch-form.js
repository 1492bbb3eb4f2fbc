// The HIT batch form (annotation/admin.py BatchForm): show only the chosen provider's fieldsets. Without
// JavaScript every fieldset stays visible, and the server reads only the chosen provider's fields anyway.
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
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("batch-form");
    if (!form) return;
    toggle(form);
    form.querySelector("select[name=provider]").addEventListener("change", function () { toggle(form); });
  });
})();
