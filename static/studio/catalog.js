/* The studio's catalog page: follow imports by polling their progress endpoint (as the console's transcript
 * export does). With Celery eager (the embedded defaults) a run is done before the page loads; the run just
 * started is still polled once, so the page shows the endpoint's word on it. Text goes in as text nodes only. */
(function () {
  "use strict";

  var POLL_MS = 700;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function show(row, p) {
    row.querySelector("progress").value = p.percent;
    // The banner over the page names the run just started: it says what the run is doing now.
    var banner = document.getElementById("run-banner");
    if (banner && banner.getAttribute("data-run") === String(p.id) && p.banner) {
      banner.textContent = p.banner;
      banner.className = "msg-" + p.banner_level;
    }
    var status = row.querySelector(".run-status");
    status.textContent = p.label;
    var result = row.querySelector(".run-result");
    if (!p.finished) return;
    result.textContent = "";
    if (p.counts) {
      result.appendChild(document.createTextNode(
        p.counts.added + " added, " + p.counts.updated + " updated, " + p.counts.archived + " archived, " +
        p.counts.rejected + " rejected"));
    }
    if (p.message) result.appendChild(el("span", "error-text", p.message));
    if (p.errors_url) {
      var link = el("a", "errors-link", "Download the error report: " + (p.counts ? p.counts.rejected : "") + " refused rows (CSV)");
      link.href = p.errors_url;
      result.appendChild(link);
    }
    row.setAttribute("data-finished", "1");
  }

  function follow(row) {
    var url = row.getAttribute("data-progress-url");
    var poll = function () {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (p) {
          show(row, p);
          row.setAttribute("data-polled", String(Number(row.getAttribute("data-polled") || 0) + 1));
          if (!p.finished) setTimeout(poll, POLL_MS);
        })
        .catch(function () { setTimeout(poll, POLL_MS * 3); });
    };
    poll();
  }

  var rows = document.querySelectorAll("tr.run");
  for (var i = 0; i < rows.length; i++) {
    var row = rows[i];
    if (row.getAttribute("data-finished") !== "1" || row.getAttribute("data-watch") === "1") follow(row);
  }
})();
