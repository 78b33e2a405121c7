/*
 * Tidemark's light and dark themes. The stylesheet follows the system's preference
 * (prefers-color-scheme) on its own; this script adds the header's toggle, whose choice
 * this browser remembers (localStorage "tidemark-theme": "light" or "dark").
 *
 * It is loaded in <head> without defer, so the remembered choice is on <html> (data-theme)
 * before the page is drawn: no flash of the other theme. A choice that matches the
 * system's preference is forgotten (the page follows the system again from then on).
 *
 * Whenever the theme in force changes (the toggle, or the system's preference while no
 * choice is remembered) it dispatches "tidemark:theme" on document, with detail.theme
 * "light" or "dark" (static/js/charts.js redraws its charts in the new colours).
 */
(function () {
  "use strict";

  var KEY = "tidemark-theme";
  var root = document.documentElement;
  var media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function remembered() {
    try {
      var value = window.localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : null;
    } catch (error) {
      return null; // storage refused (a privacy setting): follow the system
    }
  }

  function remember(value) {
    try {
      if (value) {
        window.localStorage.setItem(KEY, value);
      } else {
        window.localStorage.removeItem(KEY);
      }
    } catch (error) {
      // storage refused: the choice lasts for this page only
    }
  }

  function systemTheme() {
    return media && media.matches ? "dark" : "light";
  }

  function current() {
    return root.getAttribute("data-theme") || systemTheme();
  }

  function apply(value) {
    if (value) {
      root.setAttribute("data-theme", value);
    } else {
      root.removeAttribute("data-theme");
    }
  }

  function showToggle() {
    var dark = current() === "dark";
    Array.prototype.forEach.call(document.querySelectorAll("[data-theme-toggle]"), function (button) {
      button.setAttribute("aria-pressed", String(dark));
    });
  }

  function announce() {
    showToggle();
    document.dispatchEvent(new CustomEvent("tidemark:theme", { detail: { theme: current() } }));
  }

  function choose(value) {
    var choice = value === systemTheme() ? null : value;
    remember(choice);
    apply(choice);
    announce();
  }

  apply(remembered());

  if (media) {
    var onSystemChange = function () {
      if (!remembered()) {
        apply(null);
        announce();
      }
    };
    if (media.addEventListener) {
      media.addEventListener("change", onSystemChange);
    } else if (media.addListener) {
      media.addListener(onSystemChange);
    }
  }

  // Another tab of this browser chose: follow it.
  window.addEventListener("storage", function (event) {
    if (event.key === KEY) {
      apply(remembered());
      announce();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-theme-toggle]"), function (button) {
      button.hidden = false;
      button.addEventListener("click", function () {
        choose(current() === "dark" ? "light" : "dark");
      });
    });
    showToggle();
  });

  window.TidemarkTheme = { current: current, choose: choose };
})();
