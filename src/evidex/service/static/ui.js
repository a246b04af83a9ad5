// Keyboard shortcuts, the decision check and the moves between items of the evidex review UI
// (no build step, no dependency). j/n next, k/p previous (an item, or a row of the queue);
// 1-9 choose a tier; r reject; w write a note (Esc leaves it); Enter or Ctrl+Enter resolve;
// c claim the next free item (the queue). Keys typed into a text field stay in the field,
// except Ctrl+Enter, which resolves from anywhere, and Esc.
//
// Between items nothing reloads: a form marked data-partial (deciding, claiming, assigning)
// is posted with fetch, and the next and previous links are fetched, asking the server for
// the page's fragment (X-Evidex-Fragment: 1); the <main> and the key legend it answers are
// swapped in, the address follows (history.pushState; Back and Forward fetch again). A page
// without this script (or a fetch that fails) posts and loads whole pages, as it always did.
//
// Nothing is preselected. Each choice the reviewer must make is marked data-field="what it
// is" (a radio group's fieldset, a select, a rank input, a group of checkboxes); data-when=
// "verdict:a,b" makes it needed only when one of those verdicts is chosen, data-unless=
// "selector" satisfies it when every control the selector finds has a value. The judge's own
// choice in a field is marked data-judge (on a radio, or data-judge="value" on a select).
// `a` confirms the judge: in a focused field it sets that field to the judge's choice;
// otherwise it fills every field not chosen yet, never replacing a choice. Where the judge gave
// no grade (a fallback) nothing carries data-judge, and `a` does nothing.
// Resolving with a needed field unchosen is stopped here, naming the field; the server refuses
// it too.
(function () {
  "use strict";

  function typing(el) {
    if (!el || !el.tagName) return false;
    var tag = el.tagName.toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    if (tag !== "input") return el.isContentEditable === true;
    var type = (el.getAttribute("type") || "text").toLowerCase();
    return ["radio", "checkbox", "submit", "button", "hidden"].indexOf(type) < 0;
  }

  function decisionForm() {
    return document.querySelector("form.decision");
  }

  function submitDecision() {
    var form = decisionForm();
    if (!form) return false;
    if (form.requestSubmit) form.requestSubmit();
    else if (checkDecision(form) && !partialSubmit(form)) form.submit();
    return true;
  }

  // ---------------------------------------------------------------- moving without reloads

  var busy = false;

  function swap(html, url, push) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var main = doc.querySelector("main");
    var old = document.querySelector("main");
    if (!main || !old) return false;
    old.parentNode.replaceChild(document.importNode(main, true), old);
    var keys = doc.querySelector("footer.keys");
    var oldKeys = document.querySelector("footer.keys");
    if (oldKeys) oldKeys.parentNode.removeChild(oldKeys);
    if (keys) document.body.appendChild(document.importNode(keys, true));
    document.title = main.getAttribute("data-title") || document.title;
    document.body.setAttribute("data-page", main.getAttribute("data-page") || "");
    if (push) window.history.pushState({ partial: true }, "", url);
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    window.scrollTo(0, 0);
    // for whoever waits on the move (a benchmark, an extension): the new page is in place
    document.dispatchEvent(new CustomEvent("evidex:swapped", { detail: { url: url } }));
    return true;
  }

  // Fetch a page's fragment and swap it in; a whole page where that cannot be done (the
  // login page, a network error). `push`: the address becomes the answer's (a redirect's
  // target), else it stays (a refused decision answers on the form's own page).
  function fetchInto(url, init, push) {
    if (!window.fetch || !window.DOMParser || !window.history.pushState) return false;
    busy = true;
    init.headers = { "X-Evidex-Fragment": "1" };
    init.credentials = "same-origin";
    window.fetch(url, init).then(function (response) {
      var landed = response.url || url;
      var type = response.headers.get("Content-Type") || "";
      if (landed.indexOf("/ui/login") >= 0 || type.indexOf("text/html") < 0) {
        window.location.assign(landed);
        return null;
      }
      return response.text().then(function (html) {
        if (!swap(html, landed, push && (response.redirected || init.method === "GET"))) {
          window.location.assign(landed);
        }
      });
    }).catch(function () {
      window.location.assign(url);
    }).then(function () { busy = false; });
    return true;
  }

  function partialSubmit(form) {
    if (!form.hasAttribute("data-partial") || busy) return busy;
    var body = new URLSearchParams();
    each(form.elements, function (el) {
      if (!el.name || el.disabled) return;
      var type = (el.type || "").toLowerCase();
      if ((type === "radio" || type === "checkbox") && !el.checked) return;
      if (type === "submit" || type === "button") return;
      if (el.tagName.toLowerCase() === "select" && el.multiple) {
        each(el.options, function (o) { if (o.selected) body.append(el.name, o.value); });
        return;
      }
      body.append(el.name, el.value);
    });
    var submitter = form.__submitter;
    if (submitter && submitter.name) body.append(submitter.name, submitter.value);
    return fetchInto(form.action, { method: "POST", body: body }, true);
  }

  function go(href) {
    if (!fetchInto(href, { method: "GET" }, true)) window.location.assign(href);
  }

  window.addEventListener("popstate", function () {
    if (!fetchInto(window.location.href, { method: "GET" }, false)) window.location.reload();
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    var button = target && target.closest ? target.closest("button[type=submit]") : null;
    if (button && button.form) button.form.__submitter = button;
    var link = target && target.closest ? target.closest("a[rel=next], a[rel=prev], a.item-link") : null;
    if (link && !event.ctrlKey && !event.metaKey && !event.shiftKey && event.button === 0) {
      event.preventDefault();
      go(link.href);
    }
  });

  function each(list, fn) {
    Array.prototype.forEach.call(list, fn);
  }

  function needed(field, form) {
    var when = field.getAttribute("data-when");
    if (!when) return true;
    var parts = when.split(":");
    var checked = form.querySelector('input[name="' + parts[0] + '"]:checked');
    return !!checked && parts[1].split(",").indexOf(checked.value) >= 0;
  }

  function chosen(field, form) {
    var unless = field.getAttribute("data-unless");
    if (unless) {
      var others = form.querySelectorAll(unless);
      var all = others.length > 0;
      each(others, function (el) { if (!el.value) all = false; });
      if (all) return true;
    }
    var tag = field.tagName.toLowerCase();
    if (tag === "select" || tag === "input") return field.value.trim() !== "";
    return !!field.querySelector("input:checked");
  }

  function control(field) {
    var tag = field.tagName.toLowerCase();
    return tag === "select" || tag === "input" ? field : field.querySelector("input, select");
  }

  // The first needed field left unchosen, or null.
  function missingField(form) {
    var fields = form.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      if (needed(fields[i], form) && !chosen(fields[i], form)) return fields[i];
    }
    return null;
  }

  function checkDecision(form) {
    var typed = form.querySelector('input[name="decision_text"]');
    var message = document.getElementById("missing");
    each(form.querySelectorAll("[aria-invalid]"), function (el) { el.removeAttribute("aria-invalid"); });
    if (typed && typed.value.trim()) return true;  // the server checks a typed decision
    var field = missingField(form);
    if (!field) {
      if (message) message.hidden = true;
      return true;
    }
    field.setAttribute("aria-invalid", "true");
    if (message) {
      message.textContent = "Choose " + field.getAttribute("data-field") + " before resolving; nothing was recorded.";
      message.hidden = false;
    }
    var el = control(field);
    if (el) {
      el.focus();
      if (el.scrollIntoView) el.scrollIntoView({ block: "center" });
    }
    return false;
  }

  function setToJudge(field) {
    var tag = field.tagName.toLowerCase();
    if (tag === "select" || tag === "input") {
      if (!field.hasAttribute("data-judge")) return false;
      field.value = field.getAttribute("data-judge");
      return true;
    }
    var radio = field.querySelector("input[data-judge]");
    if (!radio) return false;
    radio.checked = true;
    return true;
  }

  // `a`: the focused field takes the judge's choice; else every unchosen field does.
  function confirmJudge(form, target) {
    var focused = target && target.closest ? target.closest("[data-field]") : null;
    if (focused && form.contains(focused) && setToJudge(focused)) return true;
    var done = false;
    each(form.querySelectorAll("[data-field]"), function (field) {
      if (!chosen(field, form) && setToJudge(field)) done = true;
    });
    return done;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || !form.classList) return;
    if (form.classList.contains("decision") && !checkDecision(form)) {
      event.preventDefault();
      return;
    }
    if (event.submitter) form.__submitter = event.submitter;
    if (form.hasAttribute("data-partial") && partialSubmit(form)) event.preventDefault();
    form.__submitter = null;
  });

  // Typing a rank or ticking a label chooses the verdict that needs it (when only one does).
  document.addEventListener("change", function (event) {
    var target = event.target;
    var form = decisionForm();
    if (!form || !target || !target.closest || !form.contains(target)) return;
    var field = target.closest("[data-when]");
    if (!field) return;
    var parts = field.getAttribute("data-when").split(":");
    var values = parts[1].split(",");
    if (values.length !== 1) return;
    var radio = form.querySelector('input[name="' + parts[0] + '"][value="' + values[0] + '"]');
    if (radio && chosen(field, form)) radio.checked = true;
  });

  function follow(rel) {
    var link = document.querySelector('a[rel="' + rel + '"]');
    if (link) go(link.href);
  }

  function moveRow(step) {
    var links = Array.prototype.slice.call(document.querySelectorAll("a.item-link"));
    if (!links.length) return;
    var at = links.indexOf(document.activeElement);
    var next = at < 0 ? (step > 0 ? 0 : links.length - 1) : Math.min(links.length - 1, Math.max(0, at + step));
    links[next].focus();
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (submitDecision()) event.preventDefault();
      return;
    }
    if (event.key === "Escape" && typing(target) && target.blur) {
      target.blur();  // back to the keys
      event.preventDefault();
      return;
    }
    var form = decisionForm();
    var inSelect = target && target.tagName && target.tagName.toLowerCase() === "select";
    if (event.key === "a" && form && !event.altKey && !event.ctrlKey && !event.metaKey &&
        (inSelect || !typing(target))) {
      if (confirmJudge(form, target)) event.preventDefault();
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey || typing(target)) return;
    var onQueue = document.body.getAttribute("data-page") === "queue";
    var key = event.key;
    if (key === "w" && form) {
      var note = form.querySelector('textarea[name="note"]');
      if (note) {
        note.focus();
        event.preventDefault();
      }
    } else if (key === "c" && onQueue) {
      var claim = document.querySelector("form.claim-next");
      if (claim) {
        if (claim.requestSubmit) claim.requestSubmit(); else claim.submit();
        event.preventDefault();
      }
    } else if (key === "j" || key === "n") {
      if (onQueue) moveRow(1); else follow("next");
      event.preventDefault();
    } else if (key === "k" || key === "p") {
      if (onQueue) moveRow(-1); else follow("prev");
      event.preventDefault();
    } else if (key === "Enter") {
      var tag = target && target.tagName ? target.tagName.toLowerCase() : "";
      if (tag !== "a" && tag !== "button" && tag !== "summary" && submitDecision()) {
        event.preventDefault();
      }
    } else if (key.length === 1) {
      var choice = document.querySelector('form.decision input[name="verdict"][data-key="' + key + '"]');
      if (choice) {
        choice.checked = true;
        choice.focus();
        event.preventDefault();
      }
    }
  });
})();
