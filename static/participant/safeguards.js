/* Participant pages: nothing typed is lost. Loaded before participant.js; every page works without it.
   - every free-text box in a kept form gets a draft key, so participant.js saves and restores it on reload
   - a live character count under each box with a limit (the server refuses over-long text in words, never cuts it)
   - the ideal reply starts from the participant's choice (empty, the model's reply or the suggested rewrite)
   - "Copy this text" on the out-of-date page; leaving no drafts behind when someone new starts
*/
(function () {
  "use strict";

  function store() { try { return window.localStorage; } catch (e) { return null; } }

  /* Drafts for every free-text box of a kept form (participant.js does the saving and restoring). */
  document.querySelectorAll("form[data-keep] textarea:not([data-draft-key])").forEach(function (area) {
    area.setAttribute("data-draft-key", "form:" + area.form.dataset.keep + ":" + area.name);
  });

  /* Live length counters: characters as the server counts them (code points, one per line break). */
  function length(text) { return Array.from(text.replace(/\r\n/g, "\n")).length; }
  document.querySelectorAll("textarea[data-limit]").forEach(function (area) {
    var limit = parseInt(area.dataset.limit, 10);
    var out = document.querySelector("[data-count-for='" + area.id + "']");
    if (!out || !limit) return;
    var live = document.createElement("span");
    live.className = "visually-hidden";
    live.setAttribute("aria-live", "polite");
    out.after(live);
    var wasOver = false;
    function update() {
      var n = length(area.value);
      var over = n > limit;
      out.textContent = over
        ? n + " of " + limit + " characters: " + (n - limit) + " too many. Please shorten it; nothing is cut off."
        : n + " of " + limit + " characters";
      out.classList.toggle("is-over", over);
      if (over !== wasOver) {
        live.textContent = over ? "Your text is longer than " + limit + " characters." : "Your text is within the limit again.";
        wasOver = over;
      }
    }
    area.addEventListener("input", update);
    area.addEventListener("attune:filled", update);
    update();
    document.addEventListener("DOMContentLoaded", update);  // after participant.js restored a draft
  });

  /* The ideal reply: start empty, from the model's reply or from the suggested rewrite, without a reload. */
  var choice = document.querySelector("[data-start-choice]");
  var golden = document.querySelector("textarea[name=human_edited]");
  if (choice && golden) {
    var lastFill = golden.value;  // as the server sent it, before any restored draft
    choice.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !button.value) return;
      event.preventDefault();
      var source = choice.querySelector("[data-start-source='" + button.value + "']");
      var text = source ? source.textContent : "";
      var typed = golden.value.trim() && golden.value !== lastFill;
      if (typed && !window.confirm("Replace what you have written so far?")) return;
      golden.value = text;
      lastFill = text;
      choice.querySelectorAll("button[name=start]").forEach(function (b) {
        b.setAttribute("aria-pressed", b === button ? "true" : "false");
      });
      golden.dispatchEvent(new Event("input", { bubbles: true }));
      golden.dispatchEvent(new Event("attune:filled"));
      golden.focus();
    });
  }

  /* Out-of-date page: copy the kept text with one press. */
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    var area = document.getElementById(button.dataset.copy);
    if (!area || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      area.select();
      navigator.clipboard.writeText(area.value).then(function () { button.textContent = "Copied"; });
    });
  });

  /* Someone new on this device: nothing of the previous person's unsent text stays in this browser. */
  document.querySelectorAll("form[data-join-new]").forEach(function (form) {
    form.addEventListener("submit", function () {
      var s = store(); if (!s) return;
      Object.keys(s).forEach(function (k) { if (k.indexOf("attune-") === 0) s.removeItem(k); });
    });
  });
})();
