/*
 * Keyboard shortcuts of the console (the layout lists them in its #tm-shortcuts dialog):
 *   /      this page's search field (its first form with role=search); a page without
 *          one opens the message search
 *   g t    topics        g g  groups        g a  alerts
 *   ?      the list of shortcuts
 * None fires while typing in a field (input, textarea, select, contenteditable), with
 * Ctrl, Alt or Meta held, or when another script already handled the key. A "g" waits
 * 1.5 s for its second key.
 */
(function () {
  "use strict";

  var SEQUENCE_MS = 1500;
  var GO = { t: "/topics/", g: "/groups/", a: "/alerts/" };
  var SEARCH_PAGE = "/messages/";
  var SEARCH_FIELD =
    'form[role="search"] input:not([type="hidden"]):not([type="checkbox"]):not([type="radio"]):not([type="submit"]):not([disabled]), ' +
    'form[role="search"] select:not([disabled])';
  var pendingG = 0;

  function typing(target) {
    if (!target || target === document.body) {
      return false;
    }
    if (target.isContentEditable) {
      return true;
    }
    var name = target.tagName;
    return name === "INPUT" || name === "TEXTAREA" || name === "SELECT";
  }

  function focusSearch() {
    var field = document.querySelector(SEARCH_FIELD);
    if (field) {
      field.focus();
      if (typeof field.select === "function" && field.tagName === "INPUT") {
        field.select();
      }
      return true;
    }
    return false;
  }

  function showList() {
    var dialog = document.getElementById("tm-shortcuts");
    if (dialog && !dialog.open && typeof dialog.showModal === "function") {
      dialog.showModal();
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.altKey || event.metaKey) {
      return;
    }
    if (typing(event.target)) {
      pendingG = 0;
      return;
    }
    var dialog = document.getElementById("tm-shortcuts");
    if (dialog && dialog.open) {
      return; // the list is open: Esc and its button close it
    }
    var key = event.key;
    if (pendingG && Date.now() - pendingG <= SEQUENCE_MS && GO[key]) {
      pendingG = 0;
      event.preventDefault();
      window.location.assign(GO[key]);
      return;
    }
    pendingG = 0;
    if (key === "g") {
      pendingG = Date.now();
      return;
    }
    if (key === "/") {
      event.preventDefault();
      if (!focusSearch()) {
        window.location.assign(SEARCH_PAGE + "#search");
      }
      return;
    }
    if (key === "?") {
      event.preventDefault();
      showList();
    }
  });

  // Arrived by "/" from a page without a search field: focus this page's.
  if (window.location.hash === "#search") {
    focusSearch();
  }
})();
