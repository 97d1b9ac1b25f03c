(function () {
  "use strict";
  var ell = "\u2026";
  // Labels are fitted to what the browser measures: a fixed guess of the
  // font's width cut them off where the font was wider.
  function fitText(text, name, px) {
    var room = px - 6;
    if (room < 8) { text.textContent = ""; return; }
    text.textContent = name;
    var full = text.getComputedTextLength();
    if (full <= room) return;
    // One measure gives the width of a character; then shorten until the
    // prefix and the ellipsis fit (one or two more measures).
    var chars = Array.from(name);
    var n = Math.min(chars.length - 1, Math.floor(room / (full / chars.length)) - 1);
    for (; n > 0; n--) {
      text.textContent = chars.slice(0, n).join("") + ell;
      if (text.getComputedTextLength() <= room) return;
    }
    text.textContent = "";
  }
  function setup(svg) {
    var W = Number(svg.getAttribute("data-w"));
    var frames = Array.prototype.slice.call(svg.querySelectorAll("g.f"));
    function layout(g, nx, nw) {
      var rect = g.querySelector("rect"), text = g.querySelector("text");
      rect.setAttribute("x", nx.toFixed(2));
      rect.setAttribute("width", Math.max(nw - 0.5, 0.1).toFixed(2));
      text.setAttribute("x", (nx + 3).toFixed(2));
      fitText(text, g.getAttribute("data-n"), nw);
    }
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
        layout(g, above ? 0 : (x - x0) / w0 * W, above ? W : w / w0 * W);
        if (above) g.classList.add("anc"); else g.classList.remove("anc");
      });
    }
    frames.forEach(function (g) {
      g.addEventListener("click", function () {
        zoom(Number(g.getAttribute("data-x")), Number(g.getAttribute("data-w")), Number(g.getAttribute("data-d")));
      });
    });
    svg.fitLabels = function () {
      frames.forEach(function (g) {
        if (g.style.display === "none") return;
        fitText(g.querySelector("text"), g.getAttribute("data-n"), Number(g.querySelector("rect").getAttribute("width")) + 0.5);
      });
    };
  }
  var flames = Array.prototype.slice.call(document.querySelectorAll("svg.fg"));
  flames.forEach(setup);
  function fitVisible() {
    flames.forEach(function (svg) { if (svg.parentNode.style.display !== "none") svg.fitLabels(); });
  }
  fitVisible();
  var buttons = Array.prototype.slice.call(document.querySelectorAll("#flamegraph .tabs button"));
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      buttons.forEach(function (o) {
        var on = o === b;
        if (on) o.classList.add("on"); else o.classList.remove("on");
        var div = document.getElementById("flame-" + o.getAttribute("data-cost"));
        if (div) div.style.display = on ? "" : "none";
      });
      fitVisible(); // a hidden graph's labels could not be measured
    });
  });

  // Call trees: switch top-down / bottom-up, and search.
  var search = document.getElementById("tree-search");
  var treeButtons = Array.prototype.slice.call(document.querySelectorAll("#trees .tabs button"));
  treeButtons.forEach(function (b) {
    b.addEventListener("click", function () {
      treeButtons.forEach(function (o) {
        var on = o === b;
        if (on) o.classList.add("on"); else o.classList.remove("on");
        var div = document.getElementById("tree-" + o.getAttribute("data-tree"));
        if (div) div.style.display = on ? "" : "none";
      });
      if (search && search.value) search.dispatchEvent(new Event("input")); // the count is the shown tree's
    });
  });
  function kidsOf(li) {
    var ul = li.querySelector(":scope > details > ul");
    return ul ? Array.prototype.slice.call(ul.children) : [];
  }
  // filterTree keeps the rows whose function contains q, their callers
  // (so that the row is reached) and their callees (what it leads to);
  // it returns the rows that match.
  function filterTree(div, q) {
    var hits = 0;
    function walk(li, under) {
      var det = li.querySelector(":scope > details");
      var self = q !== "" && li.getAttribute("data-n").toLowerCase().indexOf(q) >= 0;
      var below = false;
      kidsOf(li).forEach(function (k) { if (walk(k, under || self)) below = true; });
      var shown = q === "" || self || below || under;
      li.style.display = shown ? "" : "none";
      if (self) { li.classList.add("hit"); hits++; } else li.classList.remove("hit");
      if (det) det.open = q === "" ? li.getAttribute("data-open") === "true" : below;
      return self || below;
    }
    var top = div.querySelector(":scope > ul");
    if (top) Array.prototype.forEach.call(top.children, function (li) { walk(li, false); });
    return hits;
  }
  if (search) {
    search.addEventListener("input", function () {
      var q = search.value.trim().toLowerCase();
      var n = 0;
      Array.prototype.forEach.call(document.querySelectorAll("div.tree"), function (div) {
        var h = filterTree(div, q);
        if (div.style.display !== "none") n = h;
      });
      document.getElementById("tree-count").textContent = q === "" ? "" : n + " matching rows";
    });
  }

  // Call trees: a click on a column's title sorts every level by it, the
  // "self" rows last.
  Array.prototype.forEach.call(document.querySelectorAll("div.tree"), function (div) {
    var heads = Array.prototype.slice.call(div.querySelectorAll(".row.head .c"));
    heads.forEach(function (h) {
      h.addEventListener("click", function () {
        var col = Number(h.getAttribute("data-col"));
        heads.forEach(function (o) { if (o === h) o.classList.add("key"); else o.classList.remove("key"); });
        function val(li) { return Number(li.getAttribute("data-v").split(",")[col]); }
        Array.prototype.forEach.call(div.querySelectorAll("ul"), function (ul) {
          var lis = Array.prototype.slice.call(ul.children);
          lis.sort(function (a, b) {
            var sa = a.classList.contains("self"), sb = b.classList.contains("self");
            if (sa !== sb) return sa ? 1 : -1;
            return val(b) - val(a);
          });
          lis.forEach(function (li) { ul.appendChild(li); });
        });
      });
    });
  });

  // Callers and callees of the function picked.
  var ccEl = document.getElementById("cc-data");
  if (ccEl) {
    var cc = JSON.parse(ccEl.textContent);
    var sel = document.getElementById("cc-fn"), view = document.getElementById("cc-view");
    var byName = {};
    cc.fns.forEach(function (f, i) {
      byName[f.n] = i;
      var o = document.createElement("option");
      o.value = String(i);
      o.textContent = f.n;
      sel.appendChild(o);
    });
    function fmtBytes(v) {
      if (v < 1000) return v + "B";
      var u = "KMGTPE", k = -1;
      do { v /= 1000; k++; } while (v >= 1000 && k < u.length - 1);
      return v.toFixed(2) + u.charAt(k);
    }
    function cell(v, c) { return cc.bytes[c] ? fmtBytes(v) : String(v); }
    function table(title, rows, named) {
      var t = document.createElement("table");
      t.className = "grid cc";
      var h = "<tr>";
      cc.cols.forEach(function (c, k) { h += "<th" + (k === cc.key ? ' class="key"' : "") + ">" + c + "</th>"; });
      h += "<th>" + title + "</th></tr>";
      t.innerHTML = h;
      rows.forEach(function (r) {
        var tr = document.createElement("tr");
        r.v.forEach(function (v, k) {
          var td = document.createElement("td");
          td.textContent = cell(v, k);
          if (k === cc.key) td.className = "key";
          tr.appendChild(td);
        });
        var td = document.createElement("td");
        td.className = "fn";
        if (named && r.i !== undefined) {
          var a = document.createElement("a");
          a.href = "#callers";
          a.textContent = cc.fns[r.i].n;
          a.setAttribute("data-i", String(r.i));
          a.addEventListener("click", function (e) { e.preventDefault(); show(r.i); });
          td.appendChild(a);
        } else td.textContent = r.label;
        tr.appendChild(td);
        t.appendChild(tr);
      });
      if (rows.length === 0) {
        var tr = document.createElement("tr");
        tr.innerHTML = '<td colspan="' + (cc.cols.length + 1) + '">none</td>';
        t.appendChild(tr);
      }
      return t;
    }
    function show(i) {
      var f = cc.fns[i];
      sel.value = String(i);
      view.textContent = "";
      view.setAttribute("data-fn", f.n);
      view.appendChild(table("cost of " + f.n, [{v: f.i, label: "inclusive"}, {v: f.s, label: "self"}], false));
      var h = document.createElement("h3");
      h.textContent = "Called from";
      view.appendChild(h);
      view.appendChild(table("caller", f.up.map(function (e) { return {i: e[0], v: e.slice(1)}; }), true)).id = "cc-up";
      h = document.createElement("h3");
      h.textContent = "Calls";
      view.appendChild(h);
      view.appendChild(table("callee", f.down.map(function (e) { return {i: e[0], v: e.slice(1)}; }), true)).id = "cc-down";
    }
    sel.addEventListener("change", function () { show(Number(sel.value)); });
    if (cc.fns.length > 0) show(cc.start);
    Array.prototype.forEach.call(document.querySelectorAll("div.tree li[data-f]"), function (li) {
      var row = li.querySelector(":scope > .row, :scope > details > summary.row");
      if (!row) return;
      row.addEventListener("dblclick", function (e) {
        e.preventDefault();
        var i = byName[li.getAttribute("data-f")];
        if (i === undefined) return;
        show(i);
        document.getElementById("callers").scrollIntoView();
      });
    });
  }
  document.body.setAttribute("data-ready", "1");
})();
