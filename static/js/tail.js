/*
 * The live tail page (templates/topics/tail.html): long polls the API's tail
 * (data-tail-url: /api/v1/topics/<topic>/tail/) from the cursor the page was rendered
 * with, one poll after another, each waiting up to data-tail-wait seconds on the server
 * for messages; shows them newest first, keeping the newest data-tail-kept rows.
 *
 * While messages keep coming, a poll starts at most every MIN_POLL_MS (a busy topic is
 * shown in batches, a few a second, instead of one request per message); while none
 * come, the next poll starts at once and waits on the server.
 *
 * Pause stops polling (the poll in flight is cancelled, so it frees its server slot);
 * Resume goes on from where the tail stood. The rate cap (data-tail-rate a second) is
 * the server's: what it leaves out is counted in the answer's "dropped", which the page
 * says. A 429 (too many long polls) is retried after its Retry-After; other failures
 * after a few seconds.
 */
(function () {
  "use strict";

  var RETRY_MS = 5000;
  var MIN_POLL_MS = 100;

  function text(value) {
    return value === null || value === undefined ? "" : String(value);
  }

  function cell(content, className) {
    var td = document.createElement("td");
    if (className) {
      td.className = className;
    }
    if (content instanceof Node) {
      td.appendChild(content);
    } else {
      td.textContent = text(content);
    }
    return td;
  }

  function preview(message) {
    if (message.body_encoding !== "text") {
      return "(binary, " + message.body_bytes + " bytes)";
    }
    var body = message.body;
    return body.length > 200 ? body.slice(0, 200) + "…" : body;
  }

  function row(message) {
    var tr = document.createElement("tr");
    var time = document.createElement("time");
    time.dateTime = message.store_time;
    time.textContent = message.store_time.replace("T", " ").replace("+00:00", " UTC");
    tr.appendChild(cell(time));
    tr.appendChild(cell(message.queue, "tm-num"));
    var link = document.createElement("a");
    link.href = "/messages/" + encodeURIComponent(message.message_id) + "/";
    link.textContent = text(message.queue_offset);
    tr.appendChild(cell(link, "tm-num"));
    tr.appendChild(cell((message.keys || []).join(", ")));
    tr.appendChild(cell(message.tag));
    tr.appendChild(cell(preview(message), "tm-msg-preview"));
    tr.setAttribute("data-message-id", message.message_id);
    return tr;
  }

  function setup(box) {
    var url = box.getAttribute("data-tail-url");
    var cursor = box.getAttribute("data-tail-cursor");
    var queues = box.getAttribute("data-tail-queues");
    var expression = box.getAttribute("data-tail-filter");
    var rate = box.getAttribute("data-tail-rate");
    var wait = box.getAttribute("data-tail-wait");
    var kept = parseInt(box.getAttribute("data-tail-kept"), 10) || 500;
    var button = box.querySelector("[data-tail-pause]");
    var status = box.querySelector("[data-tail-status]");
    var counter = box.querySelector("[data-tail-count]");
    var droppedNote = box.querySelector("[data-tail-dropped]");
    var rows = box.querySelector("[data-tail-rows]");
    var empty = box.querySelector("[data-tail-empty]");
    var paused = false;
    var inFlight = null;
    var laterTimer = null;
    var shown = 0;
    var dropped = 0;
    var startedAt = 0;

    function say(message, isError) {
      status.textContent = message;
      status.classList.toggle("tm-error", Boolean(isError));
    }

    // The status (a live region) changes only when the tail's state does; the count of
    // messages shown is beside it, outside the region, so a screen reader is not told
    // of every poll.
    function live() {
      say("Live: waiting for messages.", false);
    }

    function count() {
      counter.textContent = shown + " shown" + (dropped ? ", " + dropped + " dropped" : "") + ".";
    }

    function pollUrl() {
      var query = "cursor=" + encodeURIComponent(cursor) + "&wait=" + encodeURIComponent(wait) +
        "&rate=" + encodeURIComponent(rate);
      if (queues) {
        query += "&queues=" + encodeURIComponent(queues);
      }
      if (expression) {
        query += "&filter=" + encodeURIComponent(expression);
      }
      return url + "?" + query;
    }

    function show(answer) {
      var fragment = document.createDocumentFragment();
      for (var i = answer.messages.length - 1; i >= 0; i--) {
        fragment.appendChild(row(answer.messages[i]));
      }
      rows.insertBefore(fragment, rows.firstChild);
      while (rows.children.length > kept) {
        rows.removeChild(rows.lastChild);
      }
      shown += answer.messages.length;
      if (answer.messages.length) {
        empty.hidden = true;
      }
      if (answer.dropped > 0) {
        dropped += answer.dropped;
        droppedNote.hidden = false;
        droppedNote.textContent =
          "Dropped " + answer.dropped + " message" + (answer.dropped === 1 ? "" : "s") +
          " from the view just now (" + dropped + " in all): more arrived than the cap of " +
          rate + " a second. They are in the topic: search for them on the messages page.";
      }
      count();
    }

    function pollLater(ms) {
      laterTimer = setTimeout(function () {
        laterTimer = null;
        poll();
      }, ms);
    }

    function poll() {
      if (paused || inFlight) {
        return;
      }
      var controller = new AbortController();
      inFlight = controller;
      startedAt = Date.now();
      live();
      fetch(pollUrl(), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        signal: controller.signal,
      })
        .then(function (response) {
          var type = response.headers.get("Content-Type") || "";
          if (type.indexOf("application/json") === -1) {
            throw new Error("the answer was not the tail's (has your session ended? reload the page)");
          }
          return response.json().then(function (body) {
            return { response: response, body: body };
          });
        })
        .then(function (done) {
          inFlight = null;
          if (paused) {
            return;
          }
          var response = done.response;
          if (response.status === 429) {
            var seconds = parseInt(response.headers.get("Retry-After"), 10) || 5;
            say("The server has as many tails and long polls waiting as it serves: trying again in " +
              seconds + " s.", true);
            pollLater(seconds * 1000);
            return;
          }
          if (!response.ok) {
            var error = done.body && done.body.error ? done.body.error.message : "";
            throw new Error(error || "the server answered " + response.status);
          }
          cursor = done.body.cursor;
          show(done.body);
          if (done.body.messages.length || done.body.dropped) {
            pollLater(Math.max(0, startedAt + MIN_POLL_MS - Date.now()));
          } else {
            poll();
          }
        })
        .catch(function (error) {
          if (inFlight === controller) {
            inFlight = null;
          }
          if (error && error.name === "AbortError") {
            return;
          }
          if (paused) {
            return;
          }
          say("The tail stopped: " + (error && error.message ? error.message : error) +
            " Trying again in " + RETRY_MS / 1000 + " s.", true);
          pollLater(RETRY_MS);
        });
    }

    function pause() {
      paused = true;
      if (inFlight) {
        inFlight.abort();
        inFlight = null;
      }
      if (laterTimer) {
        clearTimeout(laterTimer);
        laterTimer = null;
      }
      button.textContent = "Resume";
      button.setAttribute("aria-pressed", "true");
      say("Paused. Resume goes on from here (at most " + rate +
        " a second of what arrived meanwhile).", false);
    }

    function resume() {
      paused = false;
      button.textContent = "Pause";
      button.setAttribute("aria-pressed", "false");
      poll();
    }

    button.hidden = false;
    count();
    button.addEventListener("click", function () {
      if (paused) {
        resume();
      } else {
        pause();
      }
    });
    poll();
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-tail-url]"), setup);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
