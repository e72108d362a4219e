// Live updates: the server renders the page body and pushes it over server-sent events whenever the
// watch caches change; this script swaps it in and opens an object's YAML in a dialog.
"use strict";
(function () {
  var live = document.getElementById("live");
  var status = document.getElementById("status");
  function setStatus(state, text) {
    status.setAttribute("data-live", state);
    status.textContent = text;
  }
  if (window.EventSource) {
    var source = new EventSource("events");
    setStatus("connecting", "connecting...");
    source.onopen = function () { setStatus("connected", "live"); };
    source.onmessage = function (e) {
      var msg;
      try { msg = JSON.parse(e.data); } catch (err) { return; }
      if (typeof msg.body === "string" && msg.body.length > 0) {
        live.innerHTML = msg.body;
        setStatus("connected", "live, updated " + new Date().toLocaleTimeString());
      }
    };
    source.onerror = function () { setStatus("reconnecting", "disconnected, reconnecting..."); };
  }
  var dialog = document.getElementById("yaml");
  document.getElementById("yaml-close").addEventListener("click", function () { dialog.close(); });
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a[data-yaml]") : null;
    if (!a || !dialog.showModal) { return; }
    e.preventDefault();
    document.getElementById("yaml-title").textContent = a.getAttribute("data-yaml");
    var pre = document.getElementById("yaml-text");
    pre.textContent = "loading...";
    dialog.showModal();
    fetch(a.getAttribute("href")).then(function (r) { return r.text(); })
      .then(function (t) { pre.textContent = t; })
      .catch(function (err) { pre.textContent = "cannot load: " + err; });
  });
})();
