// Copy buttons: the only script the dashboard has. Everything works without it.
document.querySelectorAll("button[data-copy]").forEach(function (b) {
  b.addEventListener("click", function () {
    var t = document.getElementById(b.getAttribute("data-copy"));
    if (t && navigator.clipboard) {
      navigator.clipboard.writeText(t.textContent).then(function () { b.textContent = "Copied"; });
    }
  });
});
