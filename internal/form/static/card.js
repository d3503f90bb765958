// Helps the shopper type a card: the number grouped as typed (4-4-4-4,
// American Express 4-6-5) with its brand shown, MM / YY, and Luhn, expiry
// and CVV checked before the form leaves the page, the message beside the
// field. Progressive: without this script the page works the same, and the
// server checks everything again.
(function () {
  var f = document.getElementById("card-form");
  if (!f) { return; }
  var num = document.getElementById("cardNumber"), exp = document.getElementById("cardExpiry"),
    cvv = document.getElementById("cardSecurity"), brand = document.getElementById("brand");
  // The page turns autocomplete off for the number and CVV: a browser
  // without this script kept them in its history and typed them back on
  // Back. With it, leaving the page empties them (below), so the card
  // autofill gets its hints back.
  num.autocomplete = "cc-number"; cvv.autocomplete = "cc-csc";
  function digits(s) { return s.replace(/\D/g, ""); }
  function brandOf(d) {
    if (/^3[47]/.test(d)) { return "American Express"; }
    if (/^4/.test(d)) { return "Visa"; }
    if (/^(5[1-5]|2(2[2-9]|[3-6]\d|7[01]|720))/.test(d)) { return "Mastercard"; }
    if (/^(6011|65|64[4-9])/.test(d)) { return "Discover"; }
    if (/^35(2[89]|[3-8])/.test(d)) { return "JCB"; }
    if (/^3(0[0-5]|[689])/.test(d)) { return "Diners Club"; }
    if (/^62/.test(d)) { return "UnionPay"; }
    return "";
  }
  function group(d) {
    var parts = /^3[47]/.test(d) ? [4, 6, 5] : [4, 4, 4, 4, 3], out = [], i = 0;
    parts.forEach(function (n) { if (i < d.length) { out.push(d.substr(i, n)); i += n; } });
    return out.join(" ");
  }
  function luhn(d) {
    var sum = 0;
    for (var i = 0; i < d.length; i++) {
      var n = +d[d.length - 1 - i];
      if (i % 2) { n *= 2; if (n > 9) { n -= 9; } }
      sum += n;
    }
    return d.length >= 12 && sum % 10 === 0;
  }
  // The caret stays after the same count of digits when the value is
  // regrouped: an edit in the middle does not send it to the end.
  num.addEventListener("input", function () {
    var d = digits(num.value).slice(0, 19), v = group(d),
      before = digits(num.value.slice(0, num.selectionStart)).length, i = 0;
    brand.textContent = brandOf(d);
    if (v === num.value) { return; }
    num.value = v;
    for (var n = 0; i < v.length && n < before; i++) { if (/\d/.test(v[i])) { n++; } }
    num.setSelectionRange(i, i);
  });
  // Month and year as typed or pasted: "1230", "12/30", "1/30", "12/2030".
  function expiryParts(v) {
    var m = /^\D*(\d{1,2})\D+(\d*)\D*$/.exec(v), mm, yy;
    if (m) { mm = m[1]; yy = m[2]; } else { var d = digits(v); mm = d.slice(0, 2); yy = d.slice(2); }
    if (m && mm.length === 1) { mm = "0" + mm; }
    return [mm, /^20\d/.test(yy) ? yy.slice(0, 4) : yy.slice(0, 2), !!m];
  }
  exp.addEventListener("input", function (ev) {
    if (/^delete/.test(ev.inputType || "")) { return; } // let a deletion through as typed
    var p = expiryParts(exp.value);
    exp.value = p[1] || p[2] ? p[0] + " / " + p[1] : p[0];
  });
  function mark(el, msg) {
    var id = el.id + "-error", e = document.getElementById(id);
    if (!msg) {
      el.removeAttribute("aria-invalid");
      if (e) { e.remove(); }
      return false;
    }
    if (!e) {
      e = document.createElement("span");
      e.className = "error";
      e.id = id;
      // After the field's label, not inside it: inside, the message
      // would be read as part of the field's name, then again. Below a
      // row of fields, as the server puts it, after the messages of the
      // fields before it: inside the row it squeezed the fields beside
      // it to a few characters on a narrow phone.
      var at = el.closest("label") || el, row = at.closest(".row");
      if (row) {
        at = row;
        for (var s = at.nextElementSibling; s && s.className === "error" &&
          document.getElementById(s.id.slice(0, -6)).compareDocumentPosition(el) & 4; s = s.nextElementSibling) { at = s; }
      }
      at.insertAdjacentElement("afterend", e);
    }
    e.textContent = msg;
    el.setAttribute("aria-invalid", "true");
    el.setAttribute("aria-describedby", id);
    return true;
  }
  // Sent back by the server (a refusal, a decline, a pause), the page
  // starts where the shopper must act: the first field in error, else
  // the card number, which is never shown again.
  var start = f.querySelector("[aria-invalid=true]") || (document.querySelector("#declined,#paused") && num);
  if (start) { start.focus(); }
  f.addEventListener("submit", function (ev) {
    var d = digits(num.value), p = expiryParts(exp.value), now = new Date(), bad = [];
    if (mark(num, luhn(d) && brandOf(d) ? "" : f.dataset.msgNumber)) { bad.push(num); }
    var month = +p[0], year = p[1].length === 4 ? +p[1] : 2000 + +p[1], expMsg = "";
    if (p[0].length !== 2 || (p[1].length !== 2 && p[1].length !== 4) || month < 1 || month > 12) { expMsg = f.dataset.msgExpiry; }
    else if (year * 12 + month < now.getFullYear() * 12 + now.getMonth() + 1) { expMsg = f.dataset.msgExpired; }
    if (mark(exp, expMsg)) { bad.push(exp); }
    var want = /^3[47]/.test(d) ? 4 : 3;
    if (mark(cvv, /^\d+$/.test(cvv.value) && cvv.value.length === want ? "" : f.dataset.msgCvv)) { bad.push(cvv); }
    if (bad.length) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      bad[0].focus();
      return;
    }
    f.classList.add("busy");
  }, true);
  // A language switch takes the names and expiry along, never the card
  // number or CVV: the page comes back in the new language as typed.
  var lf = document.querySelector("form.languages");
  if (lf) {
    lf.addEventListener("submit", function () {
      ["cardFirstName", "cardLastName", "cardExpiry"].forEach(function (n) {
        var i = document.createElement("input");
        i.type = "hidden"; i.name = n; i.value = f.elements[n].value;
        lf.appendChild(i);
      });
    });
  }
  // Leaving the page (a post, a language switch, Back) empties the card
  // number and CVV first, so the browser neither keeps them in the page's
  // history nor types them back on Back: they never come back to a page.
  // A post has read the fields by then.
  addEventListener("pagehide", function () { num.value = ""; cvv.value = ""; });
})();
