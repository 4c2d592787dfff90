// aat dashboard: passkeys (WebAuthn). Registers them on the account page, and confirms with
// one: submitting an Approve (or Confirm and run) form, Approve selected
// (data-stepup-purpose="approve-batch"), the edit form (data-stepup-url: the server computes
// the edited call's digest from the form), or a form that changes who may decide
// (data-stepup-purpose="change"), with an empty password field, when the operator has a
// passkey, first asks the server for a challenge bound to that call's digest (or to that set
// of calls, or to that one change), gets the browser's assertion over it, and sends that in
// the form's `passkey` field (`_passkey` where data-field-prefix="_"). Registering a passkey
// needs the password, or such an assertion first. Loaded as a file (the CSP forbids inline
// script).
(function () {
  "use strict";

  function csrf() {
    var el = document.querySelector('input[name="csrf_token"]');
    return el ? el.value : "";
  }

  function postJSON(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { throw new Error(data.error || ("the server answered " + response.status)); }
        return data;
      });
    });
  }

  function supported() {
    return !!(window.PublicKeyCredential && PublicKeyCredential.parseRequestOptionsFromJSON &&
              PublicKeyCredential.parseCreationOptionsFromJSON);
  }

  function showError(text) {
    var notice = document.getElementById("passkey-error") || document.getElementById("notice");
    if (!notice) { window.alert(text); return; }
    var p = document.createElement("p");
    p.className = "notice error";
    p.setAttribute("role", "alert");
    p.textContent = text;
    if (notice.id === "passkey-error") { notice.hidden = false; notice.textContent = text; }
    else { notice.replaceChildren(p); }
  }

  // What a step-up challenge for this form is bound to: a call (digest and job) or a change
  // (its kind, and its target: data-change-target plus the fields data-change-fields names).
  function boundTo(form) {
    var purpose = form.getAttribute("data-stepup-purpose");
    if (purpose === "change") {
      var target = JSON.parse(form.getAttribute("data-change-target") || "{}");
      (form.getAttribute("data-change-fields") || "").split(" ").forEach(function (name) {
        if (name && form.elements[name]) { target[name] = form.elements[name].value.trim(); }
      });
      return { purpose: purpose, change: form.getAttribute("data-change"), target: target };
    }
    if (purpose === "approve-batch") {
      var jobs = [];
      Array.prototype.forEach.call(form.elements, function (el) {
        if (el.name === "job" && el.checked && form.elements["digest_" + el.value]) {
          jobs.push([parseInt(el.value, 10), form.elements["digest_" + el.value].value]);
        }
      });
      return { purpose: purpose, jobs: jobs };
    }
    var jobId = form.getAttribute("data-job-id");
    return { purpose: purpose, digest: form.getAttribute("data-digest"), job_id: jobId ? parseInt(jobId, 10) : null };
  }

  // The challenge's options: from the form's own step-up URL, which reads the form as the
  // server will (the edit form: its digest exists only once its values are read), or from
  // the shared endpoint, told what the form confirms.
  function optionsFor(form) {
    var url = form.getAttribute("data-stepup-url");
    if (!url) { return postJSON(document.body.getAttribute("data-stepup-options"), boundTo(form)); }
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf() },
      body: new URLSearchParams(new FormData(form))
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { throw new Error(data.error || ("the server answered " + response.status)); }
        return data;
      });
    });
  }

  function field(form, name) {
    return form.querySelector('input[name="' + (form.getAttribute("data-field-prefix") || "") + name + '"]');
  }

  // The browser's passkey assertion over a challenge bound to what `form` confirms.
  function assertFor(form) {
    return optionsFor(form).then(function (options) {
      return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
    });
  }

  // Approve (or change) with a passkey. Capture phase, so it runs before htmx's own handler.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || form.getAttribute("data-passkey") !== "yes") { return; }
    if (form.id === "add-passkey") { return; }
    // Deny selected needs no step-up, as a single Deny.
    if (event.submitter && event.submitter.hasAttribute("data-no-stepup")) { return; }
    var password = field(form, "password");
    var passkey = field(form, "passkey");
    if (!passkey || passkey.value || (password && password.value) || !supported()) { return; }
    // Nothing ticked: let the server say so.
    if (form.getAttribute("data-stepup-purpose") === "approve-batch" && !boundTo(form).jobs.length) { return; }
    event.preventDefault();
    event.stopImmediatePropagation();
    assertFor(form).then(function (credential) {
      // The live queue may have re-rendered the card meanwhile: submit the current one.
      var current = (form.id && document.getElementById(form.id)) || form;
      field(current, "passkey").value = JSON.stringify(credential.toJSON());
      current.requestSubmit(current.querySelector('button[type="submit"]:not([data-no-stepup])'));
    }).catch(function (error) {
      showError("passkey: " + error.message + " (type your password instead)");
    });
  }, true);

  // A passkey assertion is single-use: never send the same one twice.
  document.addEventListener("htmx:afterRequest", function (event) {
    var target = event.detail && event.detail.elt;
    var passkey = target && target.querySelector && target.querySelector('input[name="passkey"]');
    if (passkey) { passkey.value = ""; }
  });

  function setUpRegistration() {
    var form = document.getElementById("add-passkey");
    if (!form) { return; }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!supported()) { showError("this browser cannot make passkeys"); return; }
      var label = form.querySelector('input[name="label"]').value;
      var password = form.querySelector('input[name="password"]').value;
      // The server issues a registration challenge only with a proof: the password, or
      // (when the operator has a passkey already) an assertion bound to adding one.
      var proof = (password || form.getAttribute("data-passkey") !== "yes")
        ? Promise.resolve({ password: password })
        : assertFor(form).then(function (credential) { return { passkey: credential.toJSON() }; });
      proof.then(function (body) {
        return postJSON(form.getAttribute("data-options"), body);
      }).then(function (options) {
        return navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
      }).then(function (credential) {
        return postJSON(form.getAttribute("data-add"), { credential: credential.toJSON(), label: label });
      }).then(function () {
        window.location.assign(form.getAttribute("data-done"));
      }).catch(function (error) {
        showError("could not add the passkey: " + error.message);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", setUpRegistration);
})();
