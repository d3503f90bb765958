// Posts the result back to the shop at once, unless the shopper came back
// to this page with the back button: then the button waits for them, and
// back goes on working. Served from our origin so the Content-Security-
// Policy needs no 'unsafe-inline'.
(function () {
  var nav = window.performance && performance.getEntriesByType && performance.getEntriesByType("navigation")[0];
  if (nav && nav.type === "back_forward") return;
  document.querySelectorAll("form[data-autosubmit]").forEach(function (f) { f.submit(); });
})();
