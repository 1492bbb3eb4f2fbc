/* The slider HIT: values shown as they move, N/A for nonsensical sentences, checks before submitting,
   JSON to the submission API, then (on MTurk) the form post to turkSubmitTo/mturk/externalSubmit. */
(function () {
  "use strict";
  var form = document.getElementById("hit-form");
  if (!form) { return; }
  var message = document.getElementById("hit-message");
  var button = document.getElementById("submit");
  var fieldsets = Array.prototype.slice.call(form.querySelectorAll("fieldset.candidate"));

  function fluencyOf(fs) {
    var checked = fs.querySelector("input[type=radio]:checked");
    return checked ? parseInt(checked.value, 10) : null;
  }

  function refresh(fs) {
    var slider = fs.querySelector("input.score");
    var output = fs.querySelector("output.score-value");
    var nonsensical = fluencyOf(fs) === 0;
    slider.disabled = nonsensical;
    output.textContent = nonsensical ? "N/A" : slider.value;
    fs.classList.toggle("missing", false);
  }

  fieldsets.forEach(function (fs) {
    var slider = fs.querySelector("input.score");
    slider.addEventListener("input", function () { refresh(fs); });
    slider.addEventListener("change", function () { refresh(fs); });
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
    fieldsets.forEach(function (fs) { fs.classList.toggle("missing", missing.indexOf(fs) >= 0); });
    if (missing.length) {
      say("Please say whether every sentence makes sense (" + missing.length + " left).", true);
      missing[0].querySelector("input[type=radio]").focus();
      return;
    }
    var judgments = fieldsets.map(function (fs) {
      var fluency = fluencyOf(fs);
      var slider = fs.querySelector("input.score");
      return {
        item: fs.dataset.item,
        score: fluency === 0 ? null : parseInt(slider.value, 10),
        fluency: fluency
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
}());
