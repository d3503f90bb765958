// Disables the submit button after the first click. The server already
// refuses a second charge; this only spares the customer a confusing wait.
document.querySelectorAll("form").forEach(function (f) {
  f.addEventListener("submit", function () {
    f.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; b.textContent = "Processing…"; });
  });
});
