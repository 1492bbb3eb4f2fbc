/* The slider HIT: values shown as they move, N/A for nonsensical sentences, checks before submitting,
   JSON to the submission API, then (on MTurk) the form post to turkSubmitTo/mturk/externalSubmit.
   With data-must-move="1" (the batch setting slider_must_move, on by default) a slider starts unset, with no
   thumb (hit.css: a thumb at 50 is an anchor), and counts only once the worker set it: the first touch or click
   puts it where touched (recorded as moved), arrow keys move it, Enter or Space keeps the value it holds
   (recorded as not moved). An untouched slider is no judgment.
   Unsent answers survive a reload: kept in localStorage under this page's HIT, assignment and worker,
   restored only onto the same sentences (their per-HIT keys), dropped once the submission is saved.
   The template renders every slider unset, as this script starts it, so a page whose script has not run yet
   shows no anchor at 50. Once every handler is attached and saved answers are back, the form gets
   data-ready="1": a page driven (or tested) before that could lose a touch or submit the form natively.
   A refused Submit scrolls to the first sentence left unanswered and says why inside it (on a phone the Submit
   button is screens below); the reason goes, back by the button, once every flagged sentence is answered. */
(function () {
  "use strict";
  var form = document.getElementById("hit-form");
  if (!form) { return; }
  var message = document.getElementById("hit-message");
  var button = document.getElementById("submit");
  var fieldsets = Array.prototype.slice.call(form.querySelectorAll("fieldset.candidate"));
  var mustMove = form.dataset.mustMove === "1";
  var comment = document.getElementById("comment");
  var unanswered = false;  // the message names sentences left unanswered: it goes once none is flagged
  var STORE_PREFIX = "paraforge-answers:";
  var STALE_MS = 7 * 24 * 3600 * 1000;  // a week: an assignment never lasts longer than that unsubmitted
  var storeKey = form.dataset.canSubmit === "1" && form.dataset.assignment ?
    STORE_PREFIX + form.dataset.api + "|" + form.dataset.assignment + "|" + form.dataset.worker : null;

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
    fs.classList.toggle("thumbless", !isSet(fs));  // no thumb until set, N/A or not
    fs.classList.toggle("missing", false);
    if (unanswered && !form.querySelector("fieldset.candidate.missing")) { say("", false); }
  }

  function storage() {
    try { return window.localStorage || null; } catch (e) { return null; }  // blocked storage: nothing kept
  }

  function remember() {
    var store = storage();
    if (!store || !storeKey) { return; }
    var answers = {};
    fieldsets.forEach(function (fs) {
      answers[fs.dataset.item] = {
        score: parseInt(fs.querySelector("input.score").value, 10),
        set: isSet(fs),
        moved: fs.dataset.moved === "1",
        fluency: fluencyOf(fs)
      };
    });
    try {
      store.setItem(storeKey, JSON.stringify({at: Date.now(), answers: answers, comment: comment.value}));
    } catch (e) { /* full or blocked: the page works as before */ }
  }

  function forget() {
    var store = storage();
    if (store && storeKey) { try { store.removeItem(storeKey); } catch (e) { /* nothing kept */ } }
  }

  function dropStale() {
    var store = storage();
    if (!store) { return; }
    try {
      for (var i = store.length - 1; i >= 0; i--) {
        var key = store.key(i);
        if (key && key.indexOf(STORE_PREFIX) === 0) {
          var entry = null;
          try { entry = JSON.parse(store.getItem(key)); } catch (e) { entry = null; }
          if (!entry || typeof entry.at !== "number" || Date.now() - entry.at > STALE_MS) { store.removeItem(key); }
        }
      }
    } catch (e) { /* blocked */ }
  }

  function restore() {
    var store = storage();
    if (!store || !storeKey) { return false; }
    var entry = null;
    try { entry = JSON.parse(store.getItem(storeKey)); } catch (e) { entry = null; }
    if (!entry || typeof entry.answers !== "object" || entry.answers === null) { return false; }
    var any = false;
    fieldsets.forEach(function (fs) {
      var answer = entry.answers[fs.dataset.item];  // a sentence of this HIT only
      if (!answer || typeof answer !== "object") { return; }
      var slider = fs.querySelector("input.score");
      var score = parseInt(answer.score, 10);
      if (answer.set === true && score >= 0 && score <= 100) {
        slider.value = String(score);
        fs.dataset.set = "1";
        fs.dataset.moved = answer.moved === true ? "1" : "0";
        any = true;
      }
      if (answer.fluency === 0 || answer.fluency === 1 || answer.fluency === 2) {
        var radio = fs.querySelector('input[type=radio][value="' + answer.fluency + '"]');
        if (radio) { radio.checked = true; any = true; }
      }
      refresh(fs);
    });
    if (typeof entry.comment === "string" && entry.comment) { comment.value = entry.comment; any = true; }
    return any;
  }

  function moved(fs) { fs.dataset.set = "1"; fs.dataset.moved = "1"; refresh(fs); remember(); }
  // touched or clicked without changing the value: it now sits where touched (no thumb was shown to keep)
  function placed(fs) { if (!isSet(fs)) { moved(fs); } }
  function kept(fs) { if (!isSet(fs)) { fs.dataset.set = "1"; refresh(fs); remember(); } }  // Enter/Space

  fieldsets.forEach(function (fs) {
    var slider = fs.querySelector("input.score");
    fs.dataset.set = mustMove ? "0" : "1";
    fs.dataset.moved = "0";
    slider.addEventListener("input", function () { moved(fs); });
    slider.addEventListener("change", function () { moved(fs); });
    slider.addEventListener("pointerup", function () { placed(fs); });
    slider.addEventListener("keyup", function (event) {
      if (event.key === "Enter" || event.key === " ") { kept(fs); }
    });
    Array.prototype.forEach.call(fs.querySelectorAll("input[type=radio]"), function (radio) {
      radio.addEventListener("change", function () { refresh(fs); remember(); });
    });
    refresh(fs);
  });
  comment.addEventListener("input", remember);

  // where: the sentence the page shows (a refused Submit), otherwise the place by the Submit button
  function say(text, isError, where) {
    unanswered = false;
    if (where) { where.appendChild(message); } else if (message.nextElementSibling !== button) {
      form.insertBefore(message, button);
    }
    message.textContent = text;
    message.classList.toggle("error", !!isError);
  }

  dropStale();
  if (restore()) { say("Your unsent answers on this page are back.", false); }

  // the sticky reference must not cover what the page scrolls to (a sentence left unanswered)
  function show(fs, control) {
    fs.scrollIntoView({block: "center"});
    control.focus({preventScroll: true});
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
      say("Please say whether every sentence makes sense (" + missing.length + " left).", true, missing[0]);
      unanswered = true;
      show(missing[0], missing[0].querySelector("input[type=radio]"));
      return;
    }
    if (unset.length) {
      say("Please set the slider of sentence " + places(unset) + " (touch or click the line where the sentence " +
          "belongs), or mark the sentence nonsensical.", true, unset[0]);
      unanswered = true;
      show(unset[0], unset[0].querySelector("input.score"));
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
      forget();
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
      } else {
        forget();
      }
    });
  }
  form.dataset.ready = "1";
}());
