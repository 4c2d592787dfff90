// aat dashboard: the tab title shows the pending count, a browser notification announces a
// new approval request, and the batch form's password is cleared once sent. Loaded as a file (the CSP forbids inline script).
(function () {
  "use strict";
  var lastNewest = null;

  function live() { return document.getElementById("approvals-live"); }

  function setTitleCount(count) {
    var base = document.title.replace(/^\(\d+\)\s*/, "");
    document.title = count > 0 ? "(" + count + ") " + base : base;
    var badge = document.getElementById("nav-pending");
    if (badge) { badge.textContent = String(count); badge.hidden = count === 0; }
  }

  function check() {
    var el = live();
    if (!el) { return; }
    var count = parseInt(el.getAttribute("data-pending-count") || "0", 10);
    var newest = parseInt(el.getAttribute("data-newest-id") || "0", 10);
    setTitleCount(count);
    if (lastNewest !== null && newest > lastNewest && "Notification" in window &&
        Notification.permission === "granted") {
      new Notification("aat: approval requested", {
        body: count + " call" + (count === 1 ? "" : "s") + " waiting for a decision",
        tag: "aat-approvals"
      });
    }
    lastNewest = newest;
  }

  function setUpNotifications() {
    var button = document.getElementById("enable-notifications");
    if (!button || !("Notification" in window) || Notification.permission !== "default") { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      Notification.requestPermission().then(function () { button.hidden = true; });
    });
  }

  // Approve selected: the password typed for one batch is not left for the next.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail && event.detail.elt;
    if (form && form.id === "batch") {
      var password = form.querySelector('input[name="password"]');
      if (password) { password.value = ""; }
    }
  });

  document.addEventListener("DOMContentLoaded", function () { check(); setUpNotifications(); });
  document.addEventListener("htmx:afterSettle", check);
})();
