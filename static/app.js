// aat dashboard: the tab title shows the pending count, a browser notification announces a
// new approval request, the batch form's password is cleared once sent, and the queue's
// refresh waits while a decision is being made in it. Loaded as a file (the CSP forbids inline script).
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

  // Enter in the batch form's reason field means Deny selected, not the form's first button
  // (Approve selected).
  document.addEventListener("keydown", function (event) {
    var input = event.target;
    if (event.key !== "Enter" || !input || input.id !== "batch-reason") { return; }
    var deny = input.form && input.form.querySelector("button[data-no-stepup]");
    if (deny) { event.preventDefault(); deny.click(); }
  });

  // The queue's refresh swaps every card. It waits while the operator is deciding one: a
  // pointer pressed inside the queue (a press and a release on two copies of a button are no
  // click), or focus in one of its forms with a key or a press in the last HOLD_MS (a
  // password being typed, then Approve). A refresh a decision asks for always goes through.
  var HOLD_MS = 15000;
  var pressed = false;
  var touched = 0;

  function inQueue(node) { var el = live(); return !!(el && node && el.contains(node)); }

  document.addEventListener("pointerdown", function (event) {
    if (inQueue(event.target)) { pressed = true; touched = Date.now(); }
  }, true);
  ["pointerup", "pointercancel"].forEach(function (type) {
    document.addEventListener(type, function () {
      // The click follows the release: the refresh waits for it too.
      setTimeout(function () { pressed = false; }, 0);
    }, true);
  });
  ["keydown", "input", "focusin"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      if (inQueue(event.target)) { touched = Date.now(); }
    }, true);
  });

  function deciding() {
    if (pressed) { return true; }
    var focused = document.activeElement;
    return !!(focused && focused.form && inQueue(focused) && Date.now() - touched < HOLD_MS);
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var detail = event.detail || {};
    if (detail.elt !== live() || !deciding()) { return; }
    var cause = detail.requestConfig && detail.requestConfig.triggeringEvent;
    if (!cause || cause.type !== "queue-changed") { event.preventDefault(); }
  });

  document.addEventListener("DOMContentLoaded", function () { check(); setUpNotifications(); });
  document.addEventListener("htmx:afterSettle", check);
})();
