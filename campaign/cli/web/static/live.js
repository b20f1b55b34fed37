// Follows the database: asks the server every second whether the record changed, and
// when it did, fetches this page again and swaps its <main> in (no reload, no scroll jump).
(function () {
  "use strict";
  var version = document.body.dataset.version;
  var badge = document.getElementById("live-status");

  function say(text, stale) {
    if (!badge) { return; }
    badge.textContent = text;
    badge.classList.toggle("stale", stale);
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var main = fresh.querySelector("main");
    var now = fresh.body ? fresh.body.dataset.version : null;
    if (!main || !now) { return; }
    document.querySelector("main").replaceWith(document.importNode(main, true));
    version = now;
    document.body.dataset.version = now;
  }

  function tick() {
    fetch("/api/version", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        say("live", false);
        if (data.version === version) { return null; }
        return fetch(location.pathname, { cache: "no-store", credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
          .then(swap);
      })
      .catch(function () { say("not updating: server unreachable", true); })
      .then(function () { window.setTimeout(tick, 1000); });
  }
  window.setTimeout(tick, 1000);
})();
