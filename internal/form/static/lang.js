// A language switch shows the same page in another language, so it takes
// the page's place in the browser's history instead of adding a page: Back
// after switching showed the same page again. The switch is posted in the
// background (it sets the language cookie and answers 303 to this same
// page), then the page is loaded again in its place. Without this script,
// or when the background post fails, the form posts as it always did.
document.querySelectorAll("form.languages").forEach(function (f) {
  f.addEventListener("submit", function (ev) {
    var b = ev.submitter;
    if (!b || !b.name || !window.fetch || !window.URLSearchParams || ev.defaultPrevented) { return; }
    ev.preventDefault();
    // After the form's other listeners: card.js adds the names typed.
    setTimeout(function () {
      var body = new URLSearchParams(new FormData(f));
      body.append(b.name, b.value);
      fetch(f.action, { method: "POST", body: body, redirect: "manual", credentials: "same-origin" }).then(function () {
        location.replace(location.pathname);
      }, function () {
        var i = document.createElement("input");
        i.type = "hidden"; i.name = b.name; i.value = b.value;
        f.appendChild(i);
        f.submit();
      });
    });
  });
});
