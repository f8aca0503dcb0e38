// kstack status page: live updates. The server sends a `change` event on /status/events
// (Server-Sent Events) after each host or cloud change; this script then fetches the
// server-rendered live part (/status/live) and swaps it in. No timer polls anything: a
// fetch runs only after an event, at most one at a time, and once more if events came
// while it ran.
"use strict";
(function () {
  var conn = document.getElementById("conn");
  var live = document.getElementById("live");
  var running = false;
  var again = false;

  function setConn(state, text) {
    conn.dataset.state = state;
    conn.textContent = text;
  }

  function refresh() {
    if (running) {
      again = true;
      return;
    }
    running = true;
    again = false;
    fetch("/status/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          // The sign-in expired or the token was revoked: show the login form.
          window.location.reload();
          throw new Error("signed out");
        }
        if (!r.ok) throw new Error("status " + r.status);
        return r.text();
      })
      .then(function (html) {
        // Keep open what the reader opened.
        var open = Array.prototype.map.call(
          live.querySelectorAll("details[open]"), function (d) { return d.id; });
        live.innerHTML = html;
        open.forEach(function (id) {
          var d = id && document.getElementById(id);
          if (d) d.open = true;
        });
        live.dataset.updated = new Date().toISOString();
        setConn("live", "live");
      })
      .catch(function (e) {
        setConn("error", "update failed: " + e.message);
      })
      .then(function () {
        running = false;
        if (again) refresh();
      });
  }

  var events = new EventSource("/status/events");
  events.addEventListener("hello", function () {
    setConn("live", "live");
    // Whatever changed between the page's render and this connection (or while the
    // connection was down) is fetched once now.
    refresh();
  });
  events.addEventListener("change", refresh);
  events.onerror = function () {
    // EventSource reconnects by itself; say so meanwhile.
    setConn("reconnecting", "reconnecting");
  };
})();
