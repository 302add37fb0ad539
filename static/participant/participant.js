/* Participant pages: small progressive enhancements. Every page works without this file.
   - keeps unsent text (chat message, golden reply) in localStorage so a closed tab loses nothing
   - prevents accidental double submission (the server is idempotent anyway)
   - streams the model's reply into the chat as it arrives (NDJSON over fetch)
*/
(function () {
  "use strict";

  function store() { try { return window.localStorage; } catch (e) { return null; } }

  /* Drafts: restore into an empty (or untouched prefilled) textarea, save on every keystroke. */
  document.querySelectorAll("textarea[data-draft-key]").forEach(function (area) {
    var s = store(); if (!s) return;
    var key = "attune-draft:" + area.dataset.draftKey;
    var saved = s.getItem(key);
    if (saved !== null && saved !== "" && (area.value === "" || area.value === area.defaultValue)) area.value = saved;
    area.addEventListener("input", function () { s.setItem(key, area.value); });
  });
  function clearDraft(area) { var s = store(); if (s && area && area.dataset.draftKey) s.removeItem("attune-draft:" + area.dataset.draftKey); }

  /* Choices made but not yet saved (radios, checkboxes, selects) survive a refresh or a closed tab.
     Pages that re-show submitted values after an error are left as the server rendered them. */
  var showingErrors = !!document.querySelector(".error-summary");
  document.querySelectorAll("form[data-keep]").forEach(function (form) {
    var s = store(); if (!s) return;
    var key = "attune-form:" + form.dataset.keep;
    var fields = form.querySelectorAll("input[type=radio], input[type=checkbox], select");
    var saved = s.getItem(key);
    if (saved && !showingErrors) {
      try {
        var state = JSON.parse(saved);
        fields.forEach(function (el) {
          if (!(el.name in state)) return;
          if (el.tagName === "SELECT") el.value = state[el.name][0] || "";
          else el.checked = state[el.name].indexOf(el.value) !== -1;
        });
      } catch (e) { s.removeItem(key); }
    }
    form.addEventListener("change", function () {
      var state = {};
      fields.forEach(function (el) {
        if (!(el.name in state)) state[el.name] = [];
        if (el.tagName === "SELECT") state[el.name].push(el.value);
        else if (el.checked) state[el.name].push(el.value);
      });
      s.setItem(key, JSON.stringify(state));
    });
  });

  /* At the end (or after withdrawing) nothing of the participant's is left in this browser. */
  if (document.querySelector("[data-clear-saved]")) {
    var st = store();
    if (st) Object.keys(st).forEach(function (k) { if (k.indexOf("attune-") === 0) st.removeItem(k); });
  }

  /* One submission per click: disable the button just after the browser has taken the form data.
     A button must never stay dead, so the form is released again when its page is shown anew (back-forward
     cache: pageshow), when its navigation ends without a new page (the browser's Stop, a dropped connection:
     the Navigation API's navigateerror) and, where that API is missing, after a while. */
  var onceForms = [];
  function holdOnce(form, button) {
    form.dataset.submitting = "1";
    setTimeout(function () { button.disabled = true; }, 0);
    if (!window.navigation) form.onceRelease = setTimeout(function () { releaseOnce(form); }, 10000);
  }
  function releaseOnce(form) {
    clearTimeout(form.onceRelease);
    if (form.dataset.submitting !== "1") return;
    delete form.dataset.submitting;
    form.querySelectorAll("button[data-once]").forEach(function (b) { b.disabled = false; });
  }
  function releaseAllOnce() { onceForms.forEach(releaseOnce); }
  window.addEventListener("pageshow", function (event) { if (event.persisted) releaseAllOnce(); });
  if (window.navigation) window.navigation.addEventListener("navigateerror", releaseAllOnce);
  document.querySelectorAll("form").forEach(function (form) {
    if (form.hasAttribute("data-chat-form")) return;
    onceForms.push(form);
    form.addEventListener("submit", function (event) {
      var button = event.submitter || form.querySelector("[data-once]");
      if (button && button.hasAttribute("data-once")) {
        if (form.dataset.submitting === "1") { event.preventDefault(); return; }
        holdOnce(form, button);
      }
    });
  });

  /* Choosing a strength ticks the feeling (the server treats it the same way). */
  document.querySelectorAll("[data-mood-item]").forEach(function (item) {
    var box = item.querySelector("input[type=checkbox]");
    var strength = item.querySelector("select");
    if (box && strength) strength.addEventListener("change", function () { if (strength.value) box.checked = true; });
  });

  var summary = document.querySelector("[data-focus-on-load]");
  if (summary) summary.focus();

  /* Chat */
  var chat = document.querySelector("[data-chat]");
  if (!chat) return;
  var list = chat.querySelector(".messages");
  var statusLine = chat.querySelector("[data-chat-status]");
  var errorBox = chat.querySelector("[data-chat-error]");
  var errorText = chat.querySelector("[data-chat-error-text]");
  var form = chat.querySelector("[data-chat-form]");
  var retryForm = chat.querySelector("[data-retry-form]");
  var finishForm = chat.querySelector("[data-chat-finish]");
  var continueBox = chat.querySelector("[data-chat-continue]");
  var csrf = (chat.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";
  var modelName = "Model";

  function bubble(who, cls, text) {
    var li = document.createElement("li");
    li.className = "bubble " + cls;
    var label = document.createElement("p"); label.className = "bubble-who"; label.textContent = who;
    var body = document.createElement("div"); body.className = "bubble-text"; body.dir = "auto"; body.textContent = text;
    li.appendChild(label); li.appendChild(body); list.appendChild(li);
    return li;
  }
  var defaultError = errorText.textContent;
  function showError(message) {
    errorText.textContent = message || defaultError;  /* never an earlier, unrelated message */
    errorBox.hidden = false;
    statusLine.textContent = "";
  }
  function hideError() { errorBox.hidden = true; }
  function ensureRetry(url) {
    if (!retryForm) {
      retryForm = document.createElement("form");
      retryForm.method = "post"; retryForm.className = "actions"; retryForm.setAttribute("data-retry-form", "");
      var token = document.createElement("input"); token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrf;
      var button = document.createElement("button"); button.type = "submit"; button.className = "button"; button.setAttribute("data-retry", "");
      retryForm.appendChild(token); retryForm.appendChild(button);
      errorBox.after(retryForm);
      retryForm.addEventListener("submit", onRetry);
    }
    retryForm.action = url;
    retryForm.hidden = false;
    var b = retryForm.querySelector("button"); b.textContent = "Try again"; b.disabled = false;
  }
  function onRetry(event) { event.preventDefault(); streamReply(retryForm.action); }

  function streamReply(url) {
    hideError();
    if (retryForm) retryForm.hidden = true;
    if (finishForm) finishForm.hidden = true;
    var li = bubble(modelName, "bubble-model", "");
    var body = li.querySelector(".bubble-text");
    li.setAttribute("aria-busy", "true");
    statusLine.textContent = modelName + " is replying\u2026";
    var finished = false;
    function fail(message) {
      if (finished) return; finished = true;
      li.remove();
      showError(message);
      ensureRetry(url);
    }
    fetch(url, { method: "POST", credentials: "same-origin",
                 headers: { "Accept": "application/x-ndjson", "X-CSRFToken": csrf } })
      .then(function (response) {
        if (!response.ok || !response.body) { fail(); return; }
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        function handle(line) {
          if (!line.trim()) return;
          var event;
          try { event = JSON.parse(line); } catch (e) { fail(); return; }
          if (event.type === "delta") { body.textContent += event.text; }
          else if (event.type === "restart") { body.textContent = ""; }
          else if (event.type === "done") {
            finished = true;
            reader.cancel().catch(function () {});  /* the reply is whole: let go of the stream */
            li.removeAttribute("aria-busy");
            statusLine.textContent = "The reply is complete.";
            if (chat.querySelector("[data-safety-panel] form")) return;  /* the panel's choices are the way on */
            continueBox.hidden = false;
            var link = continueBox.querySelector("a");
            link.href = event.next;
            link.focus();
          } else if (event.type === "error") { fail(event.message); }
          else if (event.type === "redirect") { finished = true; window.location.href = event.next; }
          else if (event.type === "busy") { finished = true; setTimeout(function () { window.location.reload(); }, 1500); }
        }
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) { handle(buffer); if (!finished) fail(); return; }
            buffer += decoder.decode(chunk.value, { stream: true });
            var lines = buffer.split("\n");
            buffer = lines.pop();
            lines.forEach(handle);
            return pump();
          });
        }
        return pump();
      })
      .catch(function () { fail(); });
  }

  if (retryForm) retryForm.addEventListener("submit", onRetry);

  if (form) {
    var area = form.querySelector("textarea");
    form.addEventListener("submit", function (event) {
      if (event.submitter && event.submitter.hasAttribute("data-finish")) {
        /* "Finish the chat" is an ordinary post that takes the box's text along: the server refuses to
           finish while it holds unsent words (the page comes back with them), and otherwise asks first. */
        if (form.dataset.submitting === "1") { event.preventDefault(); return; }
        if (onceForms.indexOf(form) === -1) onceForms.push(form);
        holdOnce(form, event.submitter);
        return;
      }
      event.preventDefault();
      if (form.dataset.submitting === "1") return;
      if (!area.value.trim()) { showError("Please write a message before sending."); area.focus(); return; }
      form.dataset.submitting = "1";
      var button = form.querySelector("button"); button.disabled = true;
      hideError();
      fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin",
                           headers: { "Accept": "application/json" } })
        .then(function (response) { return response.json().then(function (data) { return [response, data]; }); })
        .then(function (pair) {
          var response = pair[0], data = pair[1];
          if (data.stale) {  // another tab moved the study on: keep the text here, offer the way forward
            showError(data.error);
            var onward = document.createElement("a"); onward.href = data.redirect; onward.textContent = "Go to where you are now";
            var line = document.createElement("p"); line.appendChild(onward); errorText.after(line);
            form.dataset.submitting = ""; button.disabled = true;
            return;
          }
          if (data.redirect) { window.location.href = data.redirect; return; }
          if (!response.ok) {
            form.dataset.submitting = ""; button.disabled = false;
            showError(data.error || "Your message could not be sent. It is still here; please try again.");
            return;
          }
          bubble("You", "bubble-user", area.value);
          if (data.safety_html) {  /* the support panel or resources, right under the message, before the reply */
            var item = document.createElement("li"); item.className = "safety-item";
            item.innerHTML = data.safety_html;
            list.appendChild(item);
          }
          clearDraft(area);
          form.hidden = true;
          streamReply(data.reply_url);
        })
        .catch(function () {
          form.dataset.submitting = ""; button.disabled = false;
          showError("Your message could not be sent. It is still here; please check your connection and try again.");
        });
    });
  }

  if (chat.dataset.pendingReplyUrl) streamReply(chat.dataset.pendingReplyUrl);
})();
