// Keyboard shortcuts of the evidex review UI (no build step, no dependency).
// j/n next, k/p previous (an item, or a row of the queue); 1-9 choose a tier; a confirm;
// r reject; Enter or Ctrl+Enter resolve. Keys typed into a text field stay in the field,
// except Ctrl+Enter, which resolves from anywhere.
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

  function submitDecision() {
    var form = document.querySelector("form.decision");
    if (!form) return false;
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
    return true;
  }

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
