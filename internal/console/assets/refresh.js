// Live refresh: every data-refresh seconds, fetch this page again and swap its content in
// place. Everything else works without this script.
(function () {
  "use strict";
  var main = document.getElementById("content");
  if (!main || !main.dataset.refresh) { return; }
  var every = Math.max(5, parseInt(main.dataset.refresh, 10) || 15) * 1000;
  setInterval(function () {
    if (document.hidden) { return; }
    fetch(window.location.href, { credentials: "same-origin", redirect: "manual" }).then(function (r) {
      if (!r.ok) { return null; }
      return r.text();
    }).then(function (html) {
      if (!html) { return; }
      var next = new DOMParser().parseFromString(html, "text/html").getElementById("content");
      if (next) { main.replaceChildren.apply(main, Array.from(next.childNodes)); }
    }).catch(function () {});
  }, every);
})();
