/* Annotation pages: keyboard shortcuts (progressive enhancement; every page works without this file).
   The keys are documented on each page (templates/participant/includes/keys_help.html):
   - in a Yes / No / Not applicable group: 1 or Y, 2 or N, 3;
   - in a Reply A / Reply B group: 1 or A, 2 or B;
   - on a feeling: 1-7 ticks it with that strength, 0 unticks it.
   A key answers the group that has focus, then focus moves to the next group in page order
   (the pair "did it happen?" -> "what I wanted" -> next question), so each answer is one key press.
*/
(function () {
  "use strict";

  var KEYS = { yes: ["1", "y"], no: ["2", "n"], na: ["3"], A: ["1", "a"], B: ["2", "b"] };

  /* The shortcuts are documented where they work, folded so the questions start high on the page. */
  document.querySelectorAll("[data-keys-help]").forEach(function (el) { el.hidden = false; });
  document.documentElement.classList.add("has-hotkeys");

  document.querySelectorAll("form[data-hotkeys]").forEach(function (form) {
    var radios = Array.prototype.slice.call(form.querySelectorAll("input[type=radio]"));
    radios.forEach(function (radio) {
      var keys = KEYS[radio.value];
      if (keys) radio.setAttribute("aria-keyshortcuts", keys.map(function (k) { return k.toUpperCase(); }).join(" "));
    });
    var groups = [];
    radios.forEach(function (radio) { if (groups.indexOf(radio.name) === -1) groups.push(radio.name); });

    function radiosOf(name) { return radios.filter(function (r) { return r.name === name; }); }
    function focusGroup(name) {
      var options = radiosOf(name);
      var target = options.filter(function (r) { return r.checked; })[0] || options[0];
      if (!target) return;
      target.focus();
      var box = target.closest("[data-answer-group]") || target;
      if (box.getBoundingClientRect) {
        var rect = box.getBoundingClientRect();
        if (rect.top < 0 || rect.bottom > window.innerHeight) box.scrollIntoView({ block: "center" });
      }
    }

    form.querySelectorAll("[data-mood-item] input[type=checkbox]").forEach(function (box) {
      box.setAttribute("aria-keyshortcuts", "1 2 3 4 5 6 7 0");
    });

    form.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      var target = event.target;
      var key = (event.key || "").toLowerCase();
      if (target.type === "radio") {
        var match = radiosOf(target.name).filter(function (r) {
          return (KEYS[r.value] || []).indexOf(key) !== -1;
        })[0];
        if (!match) return;
        event.preventDefault();
        if (!match.checked) match.click();  /* fires change: the choice is kept across a refresh */
        var next = groups[groups.indexOf(target.name) + 1];
        if (next) focusGroup(next);
        else { var button = form.querySelector("button[type=submit]"); if (button) button.focus(); }
        return;
      }
      if (target.type === "checkbox" && target.closest("[data-mood-item]")) {
        if (!/^[0-7]$/.test(key)) return;
        event.preventDefault();
        var select = target.closest("[data-mood-item]").querySelector("select");
        if (key === "0") {
          if (target.checked) target.click();
          if (select) select.value = "";
        } else {
          if (!target.checked) target.click();
          if (select) select.value = key;
        }
        form.dispatchEvent(new Event("change", { bubbles: true }));
      }
    });
  });
})();
