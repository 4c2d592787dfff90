// aat dashboard: the tab title shows the pending count (the notification of a new request is
// the pulse's, below), the batch form's password is cleared once sent, and the queue's
// refresh waits while a decision is being made in it. Loaded as a file (the CSP forbids inline script).
(function () {
  "use strict";
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
    setTitleCount(count);
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

// The outcome where the hand is (SPEC §25). A decision's answer is swapped into #notice; it
// is also said on the card that was used, and focus moves to the next card (or, when the
// call still waits, back to the card's password). The queue's refresh is told which cards
// this tab showed lately (`shown`), so a card that left (approved, denied, expired, decided
// by someone else) is replaced by a line saying so, where it was, from the server's record.
(function () {
  "use strict";
  var SEEN_MS = 120000;
  var seen = {};
  var notes = {};
  var focusAfter = null;

  function live() { return document.getElementById("approvals-live"); }
  function cardOf(node) {
    return node && node.closest ? node.closest("article.card[data-job-id]") : null;
  }

  function say(card, note) {
    var slot = card.querySelector(".card-outcome");
    if (!slot) {
      slot = document.createElement("p");
      slot.setAttribute("role", "status");
      // On an opened compact line, just above its buttons (the card's top may be far up).
      var decide = card.querySelector("details.line[open] .decide");
      var header = card.querySelector("header");
      if (decide) { decide.parentNode.insertBefore(slot, decide); }
      else { card.insertBefore(slot, header ? header.nextSibling : card.firstChild); }
    }
    slot.className = "card-outcome outcome " + (note.ok ? "ok" : "error");
    slot.textContent = note.text;
  }

  // A refusal said on a card stays in view for the refreshes that follow the decision (an
  // opened compact line, or a tall card, can otherwise leave it just off the screen).
  var reveal = null;
  function bringIn() {
    if (!reveal || Date.now() > reveal.until) { reveal = null; return; }
    var said = document.querySelector("#card-" + reveal.id + " .card-outcome");
    var box = said ? said.getBoundingClientRect() : null;
    if (box && (box.top < 0 || box.bottom > window.innerHeight)) { said.scrollIntoView({ block: "nearest" }); }
  }

  function nextCard(card) {
    var ways = ["nextElementSibling", "previousElementSibling"];
    for (var w = 0; w < ways.length; w++) {
      for (var node = card[ways[w]]; node; node = node[ways[w]]) {
        if (node.matches("article.card[data-job-id]")) { return node.id; }
      }
    }
    return null;
  }

  function settled() {
    var now = Date.now();
    document.querySelectorAll("article.card[data-job-id]").forEach(function (card) {
      seen[card.getAttribute("data-job-id")] = now;
    });
    Object.keys(seen).forEach(function (id) { if (now - seen[id] > SEEN_MS) { delete seen[id]; } });
    Object.keys(notes).forEach(function (id) {
      var card = document.getElementById("card-" + id);
      if (card) { say(card, notes[id]); } else { delete notes[id]; }
    });
    bringIn();
    if (focusAfter) {
      var target = document.getElementById(focusAfter);
      if (target) { target.focus({ preventScroll: true }); focusAfter = null; }
    }
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var detail = event.detail || {};
    if (detail.elt !== live()) { return; }
    detail.parameters.shown = Object.keys(seen).join(",");
    // The compact list's opened lines stay open through the refresh (routes/approvals.py).
    detail.parameters.open = Array.prototype.map.call(
      live().querySelectorAll("details.line[open]"),
      function (fold) { return fold.id.replace(/^line-/, ""); }).join(",");
  });

  // What is open is what the operator left open, even when a line was opened or closed
  // while a refresh was on its way (its `open` was read before).
  var folds = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail || {};
    if (!detail.target || detail.target !== live()) { folds = null; return; }
    folds = {};
    live().querySelectorAll("details.line").forEach(function (fold) { folds[fold.id] = fold.open; });
  });
  document.addEventListener("htmx:afterSwap", function () {
    var el = live();
    if (!folds || !el) { return; }
    el.querySelectorAll("details.line").forEach(function (fold) {
      if (fold.id in folds && fold.open !== folds[fold.id]) { fold.open = folds[fold.id]; }
    });
    folds = null;
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var detail = event.detail || {};
    if (!detail.target || detail.target.id !== "notice") { return; }
    var card = cardOf(detail.requestConfig && detail.requestConfig.elt);
    var said = detail.target.querySelector(".notice");
    if (!card || !said) { return; }
    var id = card.getAttribute("data-job-id");
    var note = { text: said.textContent.trim(), ok: said.classList.contains("ok") };
    decided = note.ok ? id : null;
    notes[id] = note;
    say(card, note);
    var password = document.getElementById("password-" + id);
    focusAfter = note.ok ? nextCard(card) : (password ? password.id : card.id);
    reveal = note.ok ? null : { id: id, until: Date.now() + 3000 };
    bringIn();
    if (!note.ok && focusAfter) { document.getElementById(focusAfter).focus({ preventScroll: true }); }
  });

  // The queue's refresh keeps what the operator looks at where it was: the card just decided
  // (or else the first card in view) stays at the same height on the screen, whether it
  // comes back as a card or as the line saying its outcome. The browser's own scroll
  // anchoring is off for the queue (app.css): it would pin the card below instead.
  var anchor = null;
  var decided = null;

  function slotOf(id) {
    return document.getElementById("card-" + id) || document.getElementById("outcome-" + id);
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail || {};
    if (!detail.target || detail.target !== live()) { return; }
    var slot = decided ? slotOf(decided) : null;
    if (!slot) {
      var all = live().querySelectorAll("article.card");
      for (var i = 0; i < all.length && !slot; i++) {
        if (all[i].getBoundingClientRect().bottom > 0) { slot = all[i]; }
      }
    }
    anchor = slot ? { id: slot.id.replace(/^\D+-/, ""), top: slot.getBoundingClientRect().top } : null;
  });

  function keepPlace() {
    if (!anchor) { return; }
    var slot = slotOf(anchor.id);
    if (slot) { window.scrollBy(0, slot.getBoundingClientRect().top - anchor.top); }
    // A tall card decided from its foot leaves its outcome above the screen: bring it in.
    var top = slot ? slot.getBoundingClientRect().top : 0;
    if (slot && anchor.id === decided && (top < 0 || top > window.innerHeight - 40)) {
      slot.scrollIntoView({ block: "nearest" });
    }
    if (anchor.id === decided) { decided = null; }
    anchor = null;
  }

  document.addEventListener("htmx:afterSettle", function () { keepPlace(); settled(); });
  document.addEventListener("DOMContentLoaded", settled);
})();

// Live on every page, honest when not (SPEC §25). Every signed-in page reads the pending
// count every two seconds: the tab's title and favicon badge show it, and a new request
// raises a desktop notification (once allowed) whichever page is open. When the server
// cannot be reached (this read, or the approvals page's own refresh, fails) a banner says
// so and every button on the page is disabled until it answers again: a click that would
// go nowhere is not offered as if it worked.
(function () {
  "use strict";
  var PULSE_MS = 2000;
  var down = {};
  var lastNewest = null;

  function offline() { return Object.keys(down).some(function (k) { return down[k]; }); }

  function holdButtons(hold) {
    document.querySelectorAll("main button, main input[type=submit]").forEach(function (b) {
      if (hold && !b.disabled) { b.disabled = true; b.setAttribute("data-offline", "1"); }
      if (!hold && b.getAttribute("data-offline")) { b.disabled = false; b.removeAttribute("data-offline"); }
    });
  }

  function mark(source, isDown) {
    down[source] = isDown;
    var banner = document.getElementById("connection-lost");
    var lost = offline();
    if (banner) { banner.hidden = !lost; }
    document.body.classList.toggle("offline", lost);
    holdButtons(lost);
  }

  function show(count, newest) {
    var base = document.title.replace(/^\(\d+\)\s*/, "");
    document.title = count > 0 ? "(" + count + ") " + base : base;
    var badge = document.getElementById("nav-pending");
    if (badge) { badge.textContent = String(count); badge.hidden = count === 0; }
    var icon = document.getElementById("favicon");
    var plain = document.body.getAttribute("data-favicon");
    if (icon && plain) {
      var want = count > 0 ? plain + "?n=" + count : plain;
      if (icon.getAttribute("href") !== want) { icon.setAttribute("href", want); }
    }
    if (lastNewest !== null && newest > lastNewest) { chime(); }
    if (lastNewest !== null && newest > lastNewest && "Notification" in window &&
        Notification.permission === "granted") {
      new Notification("aat: approval requested", {
        body: count + " call" + (count === 1 ? "" : "s") + " waiting for a decision",
        tag: "aat-approvals"
      });
    }
    lastNewest = newest;
  }

  // The optional sound on a new call (SPEC §25): off unless the operator turned it on in
  // this browser (remembered in localStorage). While it is off no audio is ever made, so
  // the browser's autoplay rules have nothing to refuse; once on, a short tone is made with
  // Web Audio (nothing fetched, nothing for the CSP to allow), its context resumed on the
  // operator's first press on each page, as the autoplay rules ask.
  var SOUND_KEY = "aat.sound";
  var audio = null;
  function soundOn() {
    try { return window.localStorage.getItem(SOUND_KEY) === "on"; } catch (e) { return false; }
  }
  function context() {
    if (!audio && (window.AudioContext || window.webkitAudioContext)) {
      audio = new (window.AudioContext || window.webkitAudioContext)();
    }
    if (audio && audio.state === "suspended" && navigator.userActivation &&
        navigator.userActivation.hasBeenActive) { audio.resume().catch(function () {}); }
    return audio;
  }
  function chime() {
    if (!soundOn()) { return; }
    var ctx = context();
    if (!ctx) { return; }
    var tone = ctx.createOscillator(), gain = ctx.createGain();
    tone.frequency.value = 880;
    gain.gain.setValueAtTime(0.15, ctx.currentTime);
    gain.gain.exponentialRampToValueAtTime(0.001, ctx.currentTime + 0.35);
    tone.connect(gain).connect(ctx.destination);
    tone.start();
    tone.stop(ctx.currentTime + 0.35);
  }
  function showSound() {
    var button = document.getElementById("sound-toggle");
    if (!button) { return; }
    var on = soundOn();
    button.hidden = false;
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.textContent = on ? "Sound on new calls: on" : "Sound on new calls: off";
  }
  document.addEventListener("click", function (event) {
    if (!event.target || event.target.id !== "sound-toggle") { return; }
    try { window.localStorage.setItem(SOUND_KEY, soundOn() ? "off" : "on"); } catch (e) { return; }
    if (soundOn()) { context(); }  // made inside the press, so the browser lets it play
    showSound();
  });
  ["pointerdown", "keydown"].forEach(function (type) {
    document.addEventListener(type, function () { if (soundOn()) { context(); } }, true);
  });

  function beat() {
    var url = document.body.getAttribute("data-pulse");
    if (!url) { return; }
    fetch(url, { credentials: "same-origin", headers: { "accept": "application/json" } })
      .then(function (response) {
        if (!response.ok && response.status >= 500) { throw new Error("server error"); }
        mark("pulse", false);
        var json = (response.headers.get("content-type") || "").indexOf("json") >= 0;
        return json ? response.json() : null;
      })
      .then(function (body) { if (body) { show(body.pending, body.newest); } })
      .catch(function () { mark("pulse", true); });
  }

  // Any htmx request that cannot reach the server (the queue's refresh every second, a
  // decision) says the connection is lost; any that is answered says it is back. (After
  // an outerHTML swap htmx reports on the swapped element's parent, so no element test.)
  document.addEventListener("htmx:sendError", function () { mark("live", true); });
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (xhr && xhr.status >= 500) { mark("live", true); }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail && event.detail.successful) { mark("live", false); }
  });
  // A refresh that lands while the connection is down brings enabled buttons back with it.
  document.addEventListener("htmx:afterSettle", function () { if (offline()) { holdButtons(true); } });

  // Cards count down on the page itself, so a countdown never freezes while the server is
  // away, and a call that expired says so before the queue drops it.
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.round((Date.parse(el.getAttribute("data-expires")) - now) / 1000);
      el.textContent = left <= 0 ? "expired" : "in " + spell(left);
      var card = el.closest("article.card[data-job-id]");
      if (left <= 0 && card && !card.querySelector(".expired-note")) {
        var note = document.createElement("p");
        note.className = "warning expired-note";
        note.setAttribute("role", "status");
        note.textContent = "Expired: job " + card.getAttribute("data-job-id") +
          " will not run; whoever asked must ask again.";
        var header = card.querySelector("header");
        card.insertBefore(note, header ? header.nextSibling : card.firstChild);
        card.classList.add("expired");
      }
    });
  }

  function spell(s) {
    // As the server spells it (render.py `_span`).
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m " + ("0" + (s % 60)).slice(-2) + "s"; }
    if (s < 86400) { return Math.floor(s / 3600) + "h " + ("0" + Math.floor((s % 3600) / 60)).slice(-2) + "m"; }
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  // The skip link lands on the first card when there is one (the approvals page).
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest ? event.target.closest("a.skip-link") : null;
    var first = link ? document.querySelector("article.card[data-job-id]") : null;
    if (first) { event.preventDefault(); first.focus(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    showSound();
    beat();
    setInterval(beat, PULSE_MS);
    setInterval(tick, 1000);
  });
})();

// Deciding several at once (SPEC §25): the batch bar shows only while a call is ticked and
// says how many; Select all ticks every card on the page. Ticked calls that left the queue
// before the press (decided by someone else, expired) are named to the server (`gone`),
// which says so for each instead of "no call was selected".
(function () {
  "use strict";
  var ticked = {};

  function picks() { return document.querySelectorAll('input[form="batch"][name="job"]'); }

  function update() {
    var bar = document.getElementById("batch");
    if (!bar) { return; }
    var all = picks();
    var count = 0;
    all.forEach(function (box) {
      if (box.checked) { count++; ticked[box.value] = true; } else { delete ticked[box.value]; }
    });
    bar.classList.add("js-bar");
    bar.classList.toggle("has-picks", count > 0);
    document.body.classList.toggle("picking", count > 0);
    var said = document.getElementById("batch-count");
    if (said) { said.textContent = count + " selected:"; }
    var every = document.getElementById("batch-select-all");
    if (every) {
      every.hidden = all.length < 2;
      every.textContent = count === all.length ? "Clear selection" : "Select all " + all.length;
    }
  }

  document.addEventListener("change", function (event) {
    if (event.target && event.target.getAttribute && event.target.getAttribute("form") === "batch") { update(); }
  });
  document.addEventListener("click", function (event) {
    if (!event.target || event.target.id !== "batch-select-all") { return; }
    var all = picks();
    var every = Array.prototype.every.call(all, function (b) { return b.checked; });
    all.forEach(function (box) { box.checked = !every; });
    update();
  });
  document.addEventListener("htmx:configRequest", function (event) {
    var detail = event.detail || {};
    if (!detail.elt || detail.elt.id !== "batch") { return; }
    detail.parameters.gone = Object.keys(ticked).filter(function (id) {
      return !document.getElementById("pick-" + id);
    }).join(",");
  });
  document.addEventListener("htmx:afterSettle", function () {
    Object.keys(ticked).forEach(function (id) {
      var box = document.getElementById("pick-" + id);
      if (box && !box.checked) { delete ticked[id]; }
    });
    update();
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail && event.detail.elt && event.detail.elt.id === "batch") {
      Object.keys(ticked).forEach(function (id) {
        if (!document.getElementById("pick-" + id)) { delete ticked[id]; }
      });
    }
  });
  document.addEventListener("DOMContentLoaded", update);
})();

// Keyboard (SPEC §25): j / k move between cards, a approves the card in focus (its
// password field first when approving needs one typed), d denies it, ? lists the keys.
// Never while typing in a field, nor with a modifier held.
(function () {
  "use strict";
  function cards() { return Array.prototype.slice.call(document.querySelectorAll("article.card[data-job-id]")); }
  function current() {
    var node = document.activeElement;
    return node && node.closest ? node.closest("article.card[data-job-id]") : null;
  }
  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }
  function go(step) {
    var all = cards();
    if (!all.length) { return; }
    var at = all.indexOf(current());
    var next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + step))];
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: "nearest" });
  }
  function unfold(card) {
    // A compact line is opened first: its forms are inside it.
    var fold = card.querySelector("details.line");
    if (fold && !fold.open) { fold.open = true; }
  }
  function approve(card) {
    unfold(card);
    var form = card.querySelector(".approve-form");
    if (!form) { return; }
    var password = form.querySelector('input[name="password"]');
    if (form.getAttribute("data-passkey") === "yes" || (password && password.value)) {
      form.querySelector("button.approve").click();
    } else if (password) {
      password.focus();
    }
  }
  function toggleHelp() {
    var help = document.getElementById("shortcuts");
    if (help) { help.hidden = !help.hidden; }
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var card = current();
    if (event.key === "j") { go(1); } else if (event.key === "k") { go(-1); }
    else if (event.key === "?") { toggleHelp(); }
    else if (event.key === "Escape") { var h = document.getElementById("shortcuts"); if (h) { h.hidden = true; } return; }
    else if (event.key === "a" && card) { approve(card); }
    else if (event.key === "d" && card) {
      unfold(card);
      var deny = card.querySelector("button.deny");
      if (deny) { deny.click(); }
    } else { return; }
    event.preventDefault();
  });
})();

// Times one way (SPEC §25): a time the server wrote as UTC ("2026-01-02 03:04:05 UTC") is
// shown in the viewer's local time, the UTC form kept on hover.
(function () {
  "use strict";
  var UTC = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) UTC$/;
  function localise() {
    document.querySelectorAll("[title$=' UTC']").forEach(function (el) {
      var text = el.textContent.trim();
      var m = UTC.exec(text);
      if (!m || el.getAttribute("title") !== text) { return; }
      el.textContent = new Date(m[1] + "T" + m[2] + "Z").toLocaleString();
    });
  }
  document.addEventListener("DOMContentLoaded", localise);
  document.addEventListener("htmx:afterSettle", localise);
})();
