// openprogram report: filters over the server-rendered rows, and each row's timeline drawn
// from its embedded JSON only when the row is opened (so thousands of rows load fast). The
// timeline tree is built in Python (openprogram_sim/report/_timeline.py); this only draws it.
// Every drawn node shows the trace numbers it was built from (#6–7), the #N a diff names; a
// #N in a failure's text is a link to the node. Everything from the data goes into the page
// through textContent, never as HTML.
(function () {
  "use strict";

  var LONG = 240;
  var rows = Array.prototype.slice.call(document.querySelectorAll("details.test"));
  var haystacks = rows.map(function (row) {
    var title = row.querySelector(".title");
    return [row.dataset.id, row.dataset.tags, title ? title.textContent : ""]
      .join(" ").toLowerCase();
  });

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      if (arguments[i]) parent.appendChild(arguments[i]);
    }
    return parent;
  }

  function json(value) {
    try { return JSON.stringify(value); } catch (e) { return String(value); }
  }

  // A text that is long or has many lines shows its start; the rest opens on a click.
  function collapsible(cls, text) {
    var value = text === null || text === undefined ? "" : String(text);
    var lines = value.split("\n");
    if (value.length <= LONG && lines.length <= 4) return el("span", cls, value);
    var box = el("details", cls);
    var head = lines[0].length > 120 ? lines[0].slice(0, 117) + "..." : lines[0];
    add(box, el("summary", null, head + "  (" + value.length + " chars, " + lines.length +
      " line" + (lines.length === 1 ? "" : "s") + ")"), el("pre", null, value));
    return box;
  }

  function callText(name, args) {
    if (args && typeof args === "object" && !Array.isArray(args)) {
      var parts = Object.keys(args).map(function (k) { return k + "=" + json(args[k]); });
      return name + "(" + parts.join(", ") + ")";
    }
    return name + "(" + (args === undefined ? "" : json(args)) + ")";
  }

  // ------------------------------------------------------------------ trace numbers

  // #6, or #6–9 for a node built from several entries; "" for none.
  function numberText(at) {
    if (!at || !at.length) return "";
    var first = at[0], last = at[at.length - 1];
    return "#" + first + (last !== first ? "–" + last : "");
  }

  // Marks a node with its numbers (found by showNumber) and puts their label first in it.
  function numbered(node, at) {
    var list = (at || []).filter(function (n) { return n !== null && n !== undefined; });
    if (list.length) node.dataset.at = list.join(" ");
    node.insertBefore(el("span", "at", numberText(list)), node.firstChild);
    return node;
  }

  // The node showing entry n: the one whose numbers hold n, else the one with the highest
  // number below it (a tool result message, dropped from the report's copy of the trace,
  // lands on its call).
  function nodeOf(section, n) {
    var best = null, bestAt = -1;
    Array.prototype.forEach.call(section.querySelectorAll(".timeline [data-at]"), function (node) {
      node.dataset.at.split(" ").forEach(function (text) {
        var k = Number(text);
        if (k <= n && k > bestAt) { best = node; bestAt = k; }
      });
    });
    return best;
  }

  function showNumber(row, n) {
    var section = row.querySelector(".run");
    if (!section) return null;
    Array.prototype.forEach.call(row.querySelectorAll(".hit"), function (old) {
      old.classList.remove("hit");
    });
    var line = section.querySelector('.raw .line[data-at="' + n + '"]');
    if (line) line.classList.add("hit");
    var node = nodeOf(section, n);
    if (node) {
      node.classList.add("hit");
      node.scrollIntoView({ block: "center" });
    }
    return node;
  }

  // Each #N of a failure's text becomes a link to its node (when the test has one run: with
  // several, the text does not say which trace it counts in).
  function linkNumbers(pre) {
    var text = pre.textContent, pattern = /#(\d+)\b/g, parts = [], last = 0, match;
    while ((match = pattern.exec(text)) !== null) {
      parts.push(document.createTextNode(text.slice(last, match.index)));
      var link = el("a", "at-link", match[0]);
      link.href = "#";
      link.dataset.at = match[1];
      parts.push(link);
      last = pattern.lastIndex;
    }
    if (!parts.length) return;
    parts.push(document.createTextNode(text.slice(last)));
    pre.textContent = "";
    parts.forEach(function (part) { pre.appendChild(part); });
  }

  // ------------------------------------------------------------------ tree -> DOM

  function usageText(u) {
    if (!u) return "";
    return "usage " + Object.keys(u).map(function (k) { return k + " " + u[k]; }).join(" · ");
  }

  // The result where the call returned: an error in its place, a skip marked as such.
  function resultOf(item) {
    var span = el("span", "res");
    if (!item.done) add(span, el("span", "result err", "→ " + (item.missing || "no result (the run ended first)")));
    else if (item.skipped) add(span, el("span", "result skip", "⤼ skipped: " + item.result));
    else if (item.is_error) add(span, el("span", "result err", "✗ error: "), collapsible("result err", item.result));
    else add(span, el("span", "result", "→ "), collapsible("result", item.result));
    if (item.updates) add(span, el("span", "usage", item.updates + " progress update(s)"));
    return span;
  }

  function renderItem(item) {
    var row;
    if (item.kind === "user") {
      row = el("div", "ev user" + (item.entered ? " entered" : ""));
      add(row, el("span", "label", item.label), collapsible("text", item.text));
      return numbered(row, item.at);
    }
    if (item.kind === "model") {
      row = el("div", "ev model");
      add(row, el("span", "label", "model"));
      if (item.picks.length) add(row, el("span", "picks", "picks " + item.picks.join(", ")));
      if (item.text) {
        if (item.picks.length) add(row, el("span", null, "  "));
        add(row, collapsible("text", item.text));
      }
      if (!item.picks.length && !item.text) add(row, el("span", "text", "(no text)"));
      if (item.stop && item.stop !== "stop" && item.stop !== "toolUse") {
        add(row, el("span", "result err", "  [" + item.stop + "]" +
          (item.error ? " " + item.error : "")));
      }
      if (item.usage) add(row, el("span", "usage", usageText(item.usage)));
      return numbered(row, item.at);
    }
    if (item.kind === "tool") {
      var box = el("div", "tool-box");
      row = el("div", "ev tool" + (item.skipped ? " skipped" : ""));
      add(row, el("span", "label", item.skipped ? "skipped" : "tool"),
        el("span", "call", callText(item.name, item.args)));
      add(box, numbered(row, item.at));
      if (!item.nested.length) {
        add(row, el("span", null, "  "), resultOf(item));
        return box;
      }
      item.nested.forEach(function (ex) { add(box, renderExec(ex)); });
      add(box, add(el("div", "ev"), el("span", "at"), el("span", "label", ""), resultOf(item)));
      return box;
    }
    if (item.kind === "nested") return renderExec(item.exec);
    return el("div", "ev", json(item));
  }

  function renderExec(exec) {
    var box = el("div", "exec" + (exec.depth ? " nested" : ""));
    box.dataset.depth = exec.depth;
    var total = exec.rounds.length;
    if (exec.depth) {
      var head = add(el("div", "exec-head"), el("span", null, "nested exec · depth " + exec.depth +
        " · " + total + " round" + (total === 1 ? "" : "s")));
      add(box, numbered(head, [exec.start]));
    }
    exec.rounds.forEach(function (round, i) {
      var r = el("div", "round");
      var head = add(el("div", "round-head"), el("span", null, "round " + (i + 1) + "/" + total));
      if (round.note) add(head, el("span", "note", "  " + round.note));
      add(r, numbered(head, round.at));
      round.items.forEach(function (item) { add(r, renderItem(item)); });
      add(box, r);
    });
    var reason = exec.reason || "unfinished";
    var note = {
      stop: "finished: the model answered with text",
      cap: "round cap hit after " + total + " round" + (total === 1 ? "" : "s") +
        ": a normal finish with the last message",
      error: "ended: the model stopped with an error",
      aborted: "ended: aborted",
      unfinished: "the trace ends before agent_end"
    }[reason] || "ended: " + reason;
    var stop = add(el("div", "stop " + reason), el("span", null, note));
    add(box, numbered(stop, [exec.end]));
    return box;
  }

  // One line per entry the report kept, numbered as in the trace a diff counts in.
  function rawView(run) {
    var trace = run.trace || [], numbers = run.numbers || [];
    var pre = el("pre");
    trace.forEach(function (e, i) {
      var n = i < numbers.length ? numbers[i] : i;
      var line = el("span", "line", rawLine(e, n));
      line.dataset.at = n;
      add(pre, line);
    });
    return pre;
  }

  function rawLine(e, n) {
    var line = "#" + n + " " + e.type + " d" + (e.depth || 0) + " r" + (e.round || 0);
    if (e.type.indexOf("tool_execution") === 0) line += " " + callText(e.tool_name, e.args);
    if (e.type === "tool_execution_end") line += (e.is_error ? " -> error: " : " -> ok: ") + json(e.result);
    if (e.role) line += " " + e.role + (e.text ? " " + json(e.text) : "");
    if (e.tool_calls && e.tool_calls.length) line += " calls=" + json(e.tool_calls);
    if (e.stop_reason && e.type === "message_end") line += " [" + e.stop_reason + "]";
    if (e.reason) line += " reason=" + e.reason;
    return line;
  }

  // The details of every row, parsed from the page's one JSON blob on first use.
  var details = null;
  function detailOf(row) {
    if (details === null) {
      var blob = document.getElementById("op-data");
      details = blob ? JSON.parse(blob.textContent) : [];
    }
    return details[Number(row.dataset.i)] || {};
  }

  function renderRun(run, i, count) {
    var box = el("section", "run");
    var title = count > 1 ? "run " + (i + 1) + "/" + count : "timeline";
    add(box, el("h3", null, title + (run.label ? " · " + run.label : "")));
    var timeline = add(el("div", "timeline"), renderExec(run.timeline));
    add(box, timeline);
    var raw = el("details", "raw");
    var count = (run.trace || []).length, numbers = run.numbers || [];
    var gaps = numbers.length && numbers[numbers.length - 1] !== numbers.length - 1;
    add(raw, el("summary", null, "raw events (" + count + ")" + (gaps
      ? " · numbered as recorded; the message_start/message_update entries are left out" : "")));
    raw.addEventListener("toggle", function () {
      if (raw.open && raw.childNodes.length === 1) add(raw, rawView(run));
    });
    return add(box, raw);
  }

  function renderBody(row) {
    if (row.dataset.built) return;
    row.dataset.built = "1";
    var d = detailOf(row);
    var body = el("div", "body");
    if (d.description) add(body, el("p", "description", d.description));
    add(body, add(el("p", "id", d.kind + " "), el("code", null, d.id)));
    var props = d.props || {};
    var keys = Object.keys(props);
    if (keys.length) {
      var dl = el("dl", "props");
      keys.forEach(function (k) {
        var dd = el("dd", null, props[k]);
        dd.dataset.prop = k;
        add(dl, add(el("div"), el("dt", null, k.replace(/_/g, " ")), dd));
      });
      add(body, dl);
    }
    if (d.error) add(body, add(el("p", "outcome raised", "exec raised "), el("code", null, d.error)));
    else if (d.result !== null && d.result !== undefined) {
      var shown = typeof d.result === "string" ? d.result : json(d.result);
      var said = d.kind === "session" ? "final text served " : "exec returned ";
      add(body, add(el("p", "outcome returned", said), collapsible("code", shown)));
    }
    var runs = d.runs || [];
    runs.forEach(function (run, i) { add(body, renderRun(run, i, runs.length)); });
    add(row, body);
    var failure = row.querySelector("pre.failure");
    if (failure && runs.length === 1) linkNumbers(failure);
  }

  // ------------------------------------------------------------------ filters

  var statusBoxes = Array.prototype.slice.call(document.querySelectorAll("input[name=status]"));
  var tagSelect = document.getElementById("tag");
  var search = document.getElementById("search");
  var shown = document.getElementById("shown");

  function applyFilters() {
    var statuses = {};
    statusBoxes.forEach(function (b) { statuses[b.value] = b.checked; });
    var tag = tagSelect ? tagSelect.value : "";
    var words = (search ? search.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    var count = 0;
    rows.forEach(function (row, i) {
      var ok = statuses[row.dataset.status] !== false;
      if (ok && tag) ok = (" " + row.dataset.tags + " ").indexOf(" " + tag + " ") >= 0;
      if (ok && words.length) ok = words.every(function (w) { return haystacks[i].indexOf(w) >= 0; });
      row.hidden = !ok;
      if (ok) count += 1;
    });
    if (shown) shown.textContent = count + " of " + rows.length + " shown";
  }

  var timer = null;
  function later() {
    clearTimeout(timer);
    timer = setTimeout(applyFilters, rows.length > 2000 ? 150 : 30);
  }

  statusBoxes.forEach(function (b) { b.addEventListener("change", applyFilters); });
  if (tagSelect) tagSelect.addEventListener("change", applyFilters);
  if (search) search.addEventListener("input", later);

  rows.forEach(function (row) {
    row.addEventListener("toggle", function () { if (row.open) renderBody(row); });
  });

  function byId(id) { return id ? document.getElementById(id) : null; }

  document.addEventListener("click", function (event) {
    var number = event.target.closest ? event.target.closest("a.at-link") : null;
    if (number) {
      event.preventDefault();
      showNumber(number.closest("details.test"), Number(number.dataset.at));
      return;
    }
    var link = event.target.closest ? event.target.closest("a[data-goto]") : null;
    if (!link) return;
    var row = byId(link.dataset.goto);
    if (row) { row.hidden = false; row.open = true; }
  });
  var failures = document.getElementById("open-failures");
  if (failures) failures.addEventListener("click", function () {
    rows.forEach(function (row) {
      if (!row.hidden && (row.dataset.status === "failed" || row.dataset.status === "error")) row.open = true;
    });
  });
  var collapse = document.getElementById("collapse");
  if (collapse) collapse.addEventListener("click", function () {
    rows.forEach(function (row) { row.open = false; });
  });

  // ------------------------------------------------------------------ behaviour matrix

  // Scenarios as rows, behaviours as columns: ● the scenario asserts it, ○ it only
  // exercises it. Drawn from its own JSON blob when the matrix is first opened.
  function drawMatrix(box) {
    if (box.dataset.built) return box.firstChild;
    box.dataset.built = "1";
    var blob = document.getElementById("op-matrix");
    var data = blob ? JSON.parse(blob.textContent) : { behaviours: [], rows: [] };
    var used = {};
    // each row: [page index, short path, title, exercised indices, asserted indices]
    data.rows.forEach(function (r) { r[3].forEach(function (k) { used[k] = true; }); });
    var table = el("table", "matrix");
    var head = el("tr");
    add(head, el("th", "s", "scenario"));
    data.behaviours.forEach(function (id, k) {
      var th = el("th", "b" + (used[k] ? "" : " missing"));
      var link = el("a", null, id);
      link.href = "#b-" + id;
      th.dataset.behaviour = id;
      add(th, add(el("div"), link));
      add(head, th);
    });
    add(table, add(el("thead"), head));
    var body = el("tbody");
    data.rows.forEach(function (r) {
      var tr = el("tr");
      tr.dataset.row = r[0];
      var link = el("a", null, r[1]);
      link.href = "#t" + r[0];
      link.dataset.goto = "t" + r[0];
      link.title = r[2];
      add(tr, add(el("td", "s"), link));
      var exercised = {}, asserted = {};
      r[3].forEach(function (k) { exercised[k] = true; });
      r[4].forEach(function (k) { asserted[k] = true; });
      data.behaviours.forEach(function (id, k) {
        var kind = asserted[k] ? "a" : exercised[k] ? "e" : "";
        var td = el("td", kind, asserted[k] ? "●" : exercised[k] ? "○" : "");
        if (kind) td.title = id + " · " + r[2] + (kind === "a" ? ": asserted" : ": exercised, unasserted");
        td.dataset.behaviour = id;
        add(tr, td);
      });
      add(body, tr);
    });
    add(table, body);
    add(box, table);
    return table;
  }

  var matrix = document.getElementById("matrix");
  if (matrix) matrix.addEventListener("toggle", function () {
    if (matrix.open) drawMatrix(matrix.querySelector(".matrix-box"));
  });

  // "+N more": open the matrix with the scenarios exercising that behaviour marked.
  document.addEventListener("click", function (event) {
    var more = event.target.closest ? event.target.closest("a[data-matrix]") : null;
    if (!more || !matrix) return;
    event.preventDefault();
    matrix.open = true;
    var table = drawMatrix(matrix.querySelector(".matrix-box"));
    var first = null;
    Array.prototype.forEach.call(table.querySelectorAll("tbody tr"), function (tr) {
      var cell = tr.querySelector('td[data-behaviour="' + more.dataset.matrix + '"]');
      var on = cell && cell.className !== "";
      tr.classList.toggle("sel", !!on);
      if (on && !first) first = tr;
    });
    if (first) first.scrollIntoView({ block: "center" });
  });

  // A link to #t12 opens that row.
  var target = byId(location.hash.slice(1));
  if (target && target.tagName === "DETAILS") target.open = true;
  window.openprogramReport = {
    rows: rows, render: renderBody, show: showNumber,
    matrix: function () { return matrix ? drawMatrix(matrix.querySelector(".matrix-box")) : null; }
  };
})();
