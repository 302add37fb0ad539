/* Research pages: behaviour that would otherwise be an inline handler (the Content-Security-Policy allows none).
   - a <select data-autosubmit> submits its form when changed (the dashboard's dataset filter) */
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field instanceof HTMLSelectElement && field.hasAttribute("data-autosubmit") && field.form) field.form.submit();
  });
})();
