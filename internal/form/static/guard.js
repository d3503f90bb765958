// Disables a payment form's submit button after the first click. The server
// already refuses a second charge; this only spares the customer a confusing
// wait. Only forms marked data-guard: disabling a named button (the language
// switch) would drop its value from the submission. The button keeps its
// label (a screen reader heard "…"); the form says it is busy.
document.querySelectorAll("form[data-guard]").forEach(function (f) {
  f.addEventListener("submit", function () {
    f.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
    f.classList.add("busy");
    f.setAttribute("aria-busy", "true");
  });
});
// Back to a page the browser kept in its back/forward cache would show it
// as it was left, mid-payment. Load it again instead: the server shows the
// checkout as it is now (the result, once paid).
window.addEventListener("pageshow", function (e) { if (e.persisted) location.reload(); });
