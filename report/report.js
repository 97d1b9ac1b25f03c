(function () {
  "use strict";
  var charPx = 6.6;
  function fit(name, px) {
    var n = Math.floor((px - 6) / charPx);
    if (n < 3) return "";
    var chars = Array.from(name);
    if (chars.length <= n) return name;
    return chars.slice(0, n - 2).join("") + "..";
  }
  function setup(svg) {
    var W = Number(svg.getAttribute("data-w"));
    var frames = Array.prototype.slice.call(svg.querySelectorAll("g.f"));
    function zoom(x0, w0, d0) {
      var eps = 1e-9;
      frames.forEach(function (g) {
        var x = Number(g.getAttribute("data-x")), w = Number(g.getAttribute("data-w")), d = Number(g.getAttribute("data-d"));
        var inside = d >= d0 && x >= x0 - eps && x + w <= x0 + w0 + eps;
        var above = d < d0 && x <= x0 + eps && x + w >= x0 + w0 - eps;
        if (!inside && !above) {
          g.style.display = "none";
          return;
        }
        g.style.display = "";
        var nx = above ? 0 : (x - x0) / w0 * W;
        var nw = above ? W : w / w0 * W;
        var rect = g.querySelector("rect"), text = g.querySelector("text");
        rect.setAttribute("x", nx.toFixed(2));
        rect.setAttribute("width", Math.max(nw - 0.5, 0.1).toFixed(2));
        text.setAttribute("x", (nx + 3).toFixed(2));
        text.textContent = fit(g.getAttribute("data-n"), nw);
        if (above) g.classList.add("anc"); else g.classList.remove("anc");
      });
    }
    frames.forEach(function (g) {
      g.addEventListener("click", function () {
        zoom(Number(g.getAttribute("data-x")), Number(g.getAttribute("data-w")), Number(g.getAttribute("data-d")));
      });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("svg.fg"), setup);
  var buttons = Array.prototype.slice.call(document.querySelectorAll(".tabs button"));
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      buttons.forEach(function (o) {
        var on = o === b;
        if (on) o.classList.add("on"); else o.classList.remove("on");
        var div = document.getElementById("flame-" + o.getAttribute("data-cost"));
        if (div) div.style.display = on ? "" : "none";
      });
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
