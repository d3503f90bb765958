// Follows a page that waits (a payment being confirmed, payments paused):
// asks for it again every 3 s in the background and loads it again only
// when the answer changes. A timed refresh, kept inside <noscript> for browsers
// without scripts, would move the shopper's focus and screen reader back
// to the top every time.
(function () {
  var status = +document.currentScript.dataset.status;
  function ask() {
    fetch(location.href, { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      // Settled: the page again, saying so, so that a result posts
      // itself to the shop; replace keeps the waiting page out of history.
      if (r.status !== status) { location.replace(location.pathname + "?settled"); } else { setTimeout(ask, 3000); }
    }, function () { setTimeout(ask, 3000); });
  }
  setTimeout(ask, 3000);
})();
