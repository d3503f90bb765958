// Follows a page that waits (a payment being confirmed, payments paused):
// asks for it again every 3 s in the background and reloads only when the
// answer changes. A timed refresh, kept inside <noscript> for browsers
// without scripts, would move the shopper's focus and screen reader back
// to the top every time.
(function () {
  var status = +document.currentScript.dataset.status;
  function ask() {
    fetch(location.href, { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      if (r.status !== status) { location.reload(); } else { setTimeout(ask, 3000); }
    }, function () { setTimeout(ask, 3000); });
  }
  setTimeout(ask, 3000);
})();
