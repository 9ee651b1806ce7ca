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
  // A running experiment's progress panel: its fragment is fetched every 2 s and swapped in
  // (the server escapes everything in it); when the experiment stops running, the whole page
  // is reloaded for its charts and tables.
  var live = document.querySelector("[data-live]");
  if (live && window.fetch) {
    var poll = function () {
      fetch(live.getAttribute("data-live"), { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (!r.ok) return null;
          var state = r.headers.get("X-Experiment-State");
          return r.text().then(function (t) { return { state: state, html: t }; });
        })
        .then(function (res) {
          if (!res) return;
          if (res.state && res.state !== "running") { window.location.reload(); return; }
          live.innerHTML = res.html;
        })
        .catch(function () {})
        .then(function () { window.setTimeout(poll, 2000); });
    };
    window.setTimeout(poll, 2000);
  }
  // Filter selects submit their form when changed.
  document.querySelectorAll("form.filters select").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });
})();
