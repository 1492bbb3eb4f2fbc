/* The slider HIT: values shown as they move, N/A for nonsensical sentences, checks before submitting,
   JSON to the submission API, then (on MTurk) the form post to turkSubmitTo/mturk/externalSubmit.
   With data-must-move="1" (the batch setting slider_must_move, on by default) a slider starts unset and
   counts only once the worker moved it or clicked it to keep its value: an untouched 50 is no judgment.
   Each judgment says whether its slider was moved. */
(function () {
  "use strict";
  var form = document.getElementById("hit-form");
  if (!form) { return; }
  var message = document.getElementById("hit-message");
  var button = document.getElementById("submit");
  var fieldsets = Array.prototype.slice.call(form.querySelectorAll("fieldset.candidate"));
  var mustMove = form.dataset.mustMove === "1";

  function fluencyOf(fs) {
    var checked = fs.querySelector("input[type=radio]:checked");
    return checked ? parseInt(checked.value, 10) : null;
  }

  function isSet(fs) { return fs.dataset.set === "1"; }

  function refresh(fs) {
    var slider = fs.querySelector("input.score");
    var output = fs.querySelector("output.score-value");
    var nonsensical = fluencyOf(fs) === 0;
    slider.disabled = nonsensical;
    output.textContent = nonsensical ? "N/A" : (isSet(fs) ? slider.value : "not set");
    fs.classList.toggle("unset", !nonsensical && !isSet(fs));
    fs.classList.toggle("missing", false);
  }

  function moved(fs) { fs.dataset.set = "1"; fs.dataset.moved = "1"; refresh(fs); }
  function kept(fs) { if (!isSet(fs)) { fs.dataset.set = "1"; refresh(fs); } }  // clicked: keeps its value

  fieldsets.forEach(function (fs) {
    var slider = fs.querySelector("input.score");
    fs.dataset.set = mustMove ? "0" : "1";
    fs.dataset.moved = "0";
    slider.addEventListener("input", function () { moved(fs); });
    slider.addEventListener("change", function () { moved(fs); });
    slider.addEventListener("pointerup", function () { kept(fs); });
    slider.addEventListener("keyup", function (event) {
      if (event.key === "Enter" || event.key === " ") { kept(fs); }
    });
    Array.prototype.forEach.call(fs.querySelectorAll("input[type=radio]"), function (radio) {
      radio.addEventListener("change", function () { refresh(fs); });
    });
    refresh(fs);
  });

  function say(text, isError) {
    message.textContent = text;
    message.classList.toggle("error", !!isError);
  }

  function externalSubmit(url, assignmentId) {
    var post = document.createElement("form");
    post.method = "POST";
    post.action = url;
    var field = document.createElement("input");
    field.type = "hidden";
    field.name = "assignmentId";
    field.value = assignmentId;
    post.appendChild(field);
    var done = document.createElement("input");
    done.type = "hidden";
    done.name = "saved";
    done.value = "1";
    post.appendChild(done);
    document.body.appendChild(post);
    post.submit();
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (form.dataset.canSubmit !== "1") {
      say("This HIT cannot be submitted from this page.", true);
      return;
    }
    var missing = fieldsets.filter(function (fs) { return fluencyOf(fs) === null; });
    var unset = fieldsets.filter(function (fs) { return fluencyOf(fs) !== 0 && !isSet(fs); });
    fieldsets.forEach(function (fs) {
      fs.classList.toggle("missing", missing.indexOf(fs) >= 0 || unset.indexOf(fs) >= 0);
    });
    var places = function (list) {
      return list.map(function (fs) { return fieldsets.indexOf(fs) + 1; }).join(", ");
    };
    if (missing.length) {
      say("Please say whether every sentence makes sense (" + missing.length + " left).", true);
      missing[0].querySelector("input[type=radio]").focus();
      return;
    }
    if (unset.length) {
      say("Please move the slider of sentence " + places(unset) + " (or click it to keep the value it shows), " +
          "or mark the sentence nonsensical.", true);
      unset[0].querySelector("input.score").focus();
      return;
    }
    var judgments = fieldsets.map(function (fs) {
      var fluency = fluencyOf(fs);
      var slider = fs.querySelector("input.score");
      return {
        item: fs.dataset.item,
        score: fluency === 0 ? null : parseInt(slider.value, 10),
        fluency: fluency,
        moved: fs.dataset.moved === "1"
      };
    });
    var token = document.querySelector('meta[name="submission-token"]').getAttribute("content");
    var payload = {
      assignment_id: form.dataset.assignment,
      worker_id: form.dataset.worker,
      token: token,
      judgments: judgments,
      comment: document.getElementById("comment").value
    };
    button.disabled = true;
    say("Saving…", false);
    fetch(form.dataset.api, {
      method: "POST",
      headers: {"Content-Type": "application/json", "Accept": "application/json"},
      body: JSON.stringify(payload),
      credentials: "same-origin"
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        return {ok: response.ok, status: response.status, body: body};
      });
    }).then(function (result) {
      if (!result.ok) {
        say((result.body && result.body.detail) || ("The submission was refused (" + result.status + ")."), true);
        button.disabled = false;
        return;
      }
      form.classList.add("saved");
      if (form.dataset.externalSubmit) {
        say("Saved. Sending to Mechanical Turk…", false);
        externalSubmit(form.dataset.externalSubmit, form.dataset.assignment);
      } else if (form.dataset.continue) {
        say("Saved. Thank you! Loading the next page…", false);
        window.location.assign(form.dataset.continue);  // Prolific: the study's start URL gives the next step
      } else if (form.dataset.next) {
        say("Saved. Thank you! Loading the next HIT…", false);
        document.getElementById("next-form").submit();  // taking a HIT is a POST
      } else {
        say("Saved. Thank you!", false);
      }
    }).catch(function () {
      say("Could not reach the server; your answers are still here: try again.", true);
      button.disabled = false;
    });
  });

  var returnForm = document.getElementById("return-form");
  if (returnForm) {
    returnForm.addEventListener("submit", function (event) {
      if (!window.confirm("Return this HIT? Your answers on this page are not saved, and this HIT will not be " +
                          "offered to you again.")) {
        event.preventDefault();
      }
    });
  }
}());
