// engram console, operations page: draws the figures over time with uPlot. Loaded only by that
// page, from the console's own origin (no inline script). Reads numbers the server rendered:
// the history in `#ops-plot[data-series]` (JSON) and, at each htmx refresh, the newest reading
// in `#ops-figures[data-*]`; never HTML from the network.
(function () {
  "use strict";

  // Points kept in the browser (30 minutes at one every 5 seconds).
  var KEEP = 360;
  var plot = null;
  var data = null;

  function num(text) {
    if (text === undefined || text === null || text === "") {
      return null;
    }
    var n = Number(text);
    return isFinite(n) ? n : null;
  }

  function column(values, length) {
    var out = [];
    for (var i = 0; i < length; i++) {
      out.push(values && i < values.length ? num(values[i]) : null);
    }
    return out;
  }

  function width(element) {
    return Math.max(320, element.clientWidth || 640);
  }

  function create(element) {
    if (!window.uPlot || plot) {
      return;
    }
    var history = {};
    try {
      history = JSON.parse(element.dataset.series || "{}") || {};
    } catch (e) {
      history = {};
    }
    var t = column(history.t, (history.t || []).length);
    // Series: time, waiting items, items/min, p50, p95, p99 (ms).
    data = [
      t,
      column([], t.length),
      column(history.rate, t.length),
      column(history.p50, t.length),
      column(history.p95, t.length),
      column(history.p99, t.length)
    ];
    var options = {
      width: width(element),
      height: 260,
      scales: { x: { time: true }, n: { auto: true }, ms: { auto: true } },
      series: [
        {},
        { label: "Waiting items", scale: "n", stroke: "#7a4b00", width: 2, spanGaps: true },
        { label: "Indexed items/min", scale: "n", stroke: "#1b6e3a", width: 2, spanGaps: true },
        { label: "p50 ms", scale: "ms", stroke: "#1a4f8b", width: 1.5, spanGaps: true },
        { label: "p95 ms", scale: "ms", stroke: "#6a3d9a", width: 1.5, spanGaps: true },
        { label: "p99 ms", scale: "ms", stroke: "#a4161a", width: 1.5, spanGaps: true }
      ],
      axes: [
        {},
        { scale: "n", label: "items" },
        { scale: "ms", side: 1, label: "ms", grid: { show: false } }
      ]
    };
    plot = new window.uPlot(options, data, element);
    element.dataset.drawn = "1";
    window.addEventListener("resize", function () {
      plot.setSize({ width: width(element), height: 260 });
    });
  }

  // Adds the newest reading a refreshed `#ops-figures` carries.
  function add(figures) {
    if (!plot) {
      return;
    }
    var t = num(figures.dataset.t);
    if (t === null) {
      t = Date.now() / 1000;
    }
    var values = [
      num(figures.dataset.queue),
      num(figures.dataset.rate),
      num(figures.dataset.p50),
      num(figures.dataset.p95),
      num(figures.dataset.p99)
    ];
    var times = data[0];
    var last = times.length - 1;
    if (last >= 0 && times[last] >= t) {
      // The same reading (refreshed within the server's gap): its queue is newer.
      data[1][last] = values[0];
    } else {
      times.push(t);
      for (var i = 0; i < values.length; i++) {
        data[i + 1].push(values[i]);
      }
      if (times.length > KEEP) {
        for (var j = 0; j < data.length; j++) {
          data[j].shift();
        }
      }
    }
    plot.setData(data);
  }

  function init(root) {
    root = root || document;
    var element = document.getElementById("ops-plot");
    if (element && !element.dataset.drawn) {
      create(element);
    }
    var figures = root.id === "ops-figures" ? root : root.querySelector && root.querySelector("#ops-figures");
    if (figures) {
      add(figures);
    }
  }

  if (window.htmx) {
    window.htmx.onLoad(init);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      init(document);
    });
  }
})();
