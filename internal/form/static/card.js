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
  num.addEventListener("input", function () {
    var d = digits(num.value).slice(0, 19);
    num.value = group(d);
    brand.textContent = brandOf(d);
  });
  exp.addEventListener("input", function () {
    var d = digits(exp.value).slice(0, 4);
    exp.value = d.length > 2 ? d.slice(0, 2) + " / " + d.slice(2) : d;
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
      el.insertAdjacentElement("afterend", e);
    }
    e.textContent = msg;
    el.setAttribute("aria-invalid", "true");
    el.setAttribute("aria-describedby", id);
    return true;
  }
  f.addEventListener("submit", function (ev) {
    var d = digits(num.value), m = digits(exp.value), now = new Date(), bad = [];
    if (mark(num, luhn(d) && brandOf(d) ? "" : f.dataset.msgNumber)) { bad.push(num); }
    var month = +m.slice(0, 2), year = 2000 + +m.slice(2, 4), expMsg = "";
    if (m.length !== 4 || month < 1 || month > 12) { expMsg = f.dataset.msgExpiry; }
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
})();
