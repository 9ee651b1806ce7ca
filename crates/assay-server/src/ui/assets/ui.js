// assay web UI: progressive enhancement only; every page works without this file.
(function () {
  "use strict";
  // "/" focuses the page's search or first text field, as in many admin tools.
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
    var field = document.querySelector("[data-search]") || document.querySelector("main input[type=text], main input[type=search], main textarea");
    if (field) { ev.preventDefault(); field.focus(); }
  });
  // Forms that change data ask first when marked with data-confirm.
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });
  // Filter selects submit their form when changed.
  document.querySelectorAll("form.filters select").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });
})();
