/*
 * Tidemark charts: every element with data-chart-url (templates/monitoring/_chart.html)
 * gets its Plotly figure from that URL (plus ?range=), drawn with Plotly.react. The range
 * buttons (aria-pressed) pick 1 h, 6 h, 24 h or 7 d; the auto-refresh checkbox redraws the
 * chart every 10 s while the page is visible. plotly.min.js is loaded once, on first use,
 * from the data-plotly-src of this script's tag. Safe to include several times.
 *
 * The charts follow the console's theme (static/js/theme.js): their background, text and
 * grid take the stylesheet's colours (--tm-card, --tm-fg, --tm-grid) when drawn, and are
 * redrawn in the new ones on "tidemark:theme".
 */
(function () {
  "use strict";

  if (window.TidemarkCharts) {
    window.TidemarkCharts.scan();
    return;
  }

  var REFRESH_MS = 10000;
  var script = document.currentScript;
  var plotlySrc = script ? script.getAttribute("data-plotly-src") : null;
  var plotlyLoading = null;

  var STYLE = [
    ".tm-chart-controls{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;margin-bottom:.5rem}",
    ".tm-chart-ranges{display:inline-flex;gap:.25rem}",
    ".tm-chart-ranges button[aria-pressed=false]{background:transparent;color:inherit}",
    ".tm-chart-plot{min-height:28rem}",
    ".tm-chart[aria-busy=true] .tm-chart-plot{opacity:.7}",
  ].join("\n");

  function cssColor(name, fallback) {
    var value = window.getComputedStyle(document.documentElement).getPropertyValue(name);
    return value && value.trim() ? value.trim() : fallback;
  }

  // The layout changes that paint a figure in the theme in force: every axis of the
  // figure (xaxis, yaxis2, ...) gets the grid colour.
  function themeUpdate(layout) {
    var grid = cssColor("--tm-grid", "#e3e7ee");
    var fg = cssColor("--tm-fg", "#1d2430");
    var update = {
      paper_bgcolor: cssColor("--tm-card", "#ffffff"),
      plot_bgcolor: cssColor("--tm-card", "#ffffff"),
      "font.color": fg,
    };
    Object.keys(layout || {}).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        update[key + ".gridcolor"] = grid;
        update[key + ".linecolor"] = grid;
        update[key + ".zerolinecolor"] = grid;
      }
    });
    return update;
  }

  function themed(layout) {
    var copy = JSON.parse(JSON.stringify(layout || {}));
    var update = themeUpdate(copy);
    Object.keys(update).forEach(function (path) {
      var parts = path.split(".");
      var target = copy;
      for (var i = 0; i < parts.length - 1; i++) {
        target[parts[i]] = target[parts[i]] || {};
        target = target[parts[i]];
      }
      target[parts[parts.length - 1]] = update[path];
    });
    return copy;
  }

  function addStyle() {
    var tag = document.createElement("style");
    tag.textContent = STYLE;
    document.head.appendChild(tag);
  }

  function loadPlotly() {
    if (window.Plotly) {
      return Promise.resolve(window.Plotly);
    }
    if (!plotlyLoading) {
      plotlyLoading = new Promise(function (resolve, reject) {
        if (!plotlySrc) {
          reject(new Error("the page does not say where plotly.min.js is"));
          return;
        }
        var tag = document.createElement("script");
        tag.src = plotlySrc;
        tag.onload = function () {
          resolve(window.Plotly);
        };
        tag.onerror = function () {
          plotlyLoading = null;
          reject(new Error("plotly.min.js could not be loaded"));
        };
        document.head.appendChild(tag);
      });
    }
    return plotlyLoading;
  }

  function readFigure(response) {
    var type = response.headers.get("Content-Type") || "";
    if (type.indexOf("application/json") === -1) {
      throw new Error("the answer was not a chart (has your session ended? reload the page)");
    }
    return response.json().then(function (body) {
      if (!response.ok) {
        throw new Error(body.error || "the server answered " + response.status);
      }
      return body;
    });
  }

  function setup(box) {
    if (box.getAttribute("data-chart-ready")) {
      return;
    }
    box.setAttribute("data-chart-ready", "1");
    var plot = box.querySelector("[data-chart-plot]");
    var status = box.querySelector("[data-chart-status]");
    var toggle = box.querySelector("[data-auto-refresh]");
    var buttons = Array.prototype.slice.call(box.querySelectorAll("[data-range]"));
    var pressed = box.querySelector('[data-range][aria-pressed="true"]') || buttons[0];
    var range = pressed ? pressed.getAttribute("data-range") : "1h";
    var timer = null;
    var inFlight = null;

    function say(text, isError) {
      if (status) {
        status.textContent = text;
        status.classList.toggle("tm-error", Boolean(isError));
      }
    }

    function url() {
      var base = box.getAttribute("data-chart-url");
      return base + (base.indexOf("?") === -1 ? "?" : "&") + "range=" + encodeURIComponent(range);
    }

    function load() {
      if (inFlight) {
        inFlight.abort();
      }
      var controller = new AbortController();
      inFlight = controller;
      box.setAttribute("aria-busy", "true");
      var request = fetch(url(), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        signal: controller.signal,
      }).then(readFigure);
      return Promise.all([loadPlotly(), request])
        .then(function (done) {
          var figure = done[1];
          return window.Plotly.react(plot, figure.data, themed(figure.layout), {
            responsive: true,
            displaylogo: false,
          });
        })
        .then(function () {
          say("Updated at " + new Date().toISOString().slice(11, 19) + " UTC.", false);
        })
        .catch(function (error) {
          if (error && error.name === "AbortError") {
            return;
          }
          say("Could not draw the chart: " + (error && error.message ? error.message : error), true);
        })
        .then(function () {
          if (inFlight === controller) {
            inFlight = null;
            box.removeAttribute("aria-busy");
          }
        });
    }

    function schedule() {
      if (timer) {
        clearInterval(timer);
        timer = null;
      }
      if (toggle && toggle.checked) {
        timer = setInterval(function () {
          if (!document.hidden && document.body.contains(box)) {
            load();
          }
        }, REFRESH_MS);
      }
    }

    buttons.forEach(function (button) {
      button.addEventListener("click", function () {
        range = button.getAttribute("data-range");
        buttons.forEach(function (other) {
          other.setAttribute("aria-pressed", String(other === button));
        });
        load();
      });
    });
    if (toggle) {
      toggle.addEventListener("change", function () {
        schedule();
        if (toggle.checked) {
          load();
        }
      });
    }
    load();
    schedule();
  }

  function scan() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-chart-url]"), setup);
  }

  // The theme changed: repaint every drawn chart (its data stays).
  document.addEventListener("tidemark:theme", function () {
    if (!window.Plotly) {
      return;
    }
    Array.prototype.forEach.call(document.querySelectorAll("[data-chart-plot]"), function (plot) {
      if (plot.layout) {
        window.Plotly.relayout(plot, themeUpdate(plot.layout));
      }
    });
  });

  window.TidemarkCharts = { scan: scan };
  addStyle();
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", scan);
  } else {
    scan();
  }
})();
