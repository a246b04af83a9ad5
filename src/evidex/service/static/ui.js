// Keyboard shortcuts and the decision check of the evidex review UI (no build step, no
// dependency). j/n next, k/p previous (an item, or a row of the queue); 1-9 choose a tier;
// r reject; Enter or Ctrl+Enter resolve. Keys typed into a text field stay in the field,
// except Ctrl+Enter, which resolves from anywhere.
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
    else if (checkDecision(form)) form.submit();
    return true;
  }

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
    if (form && form.classList && form.classList.contains("decision") && !checkDecision(form)) {
      event.preventDefault();
    }
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
    if (link) window.location.assign(link.href);
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
    if (key === "j" || key === "n") {
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
