// engram console: what htmx does not do itself. Loaded from the console's own origin (the
// Content-Security-Policy allows no inline script); reads data the server rendered into
// attributes, never HTML from the network.
(function () {
  "use strict";

  // An upload's progress bar follows the request's bytes sent.
  document.addEventListener("htmx:xhr:progress", function (event) {
    var bar = document.getElementById("upload-progress");
    if (bar && event.detail && event.detail.lengthComputable) {
      bar.value = Math.round((event.detail.loaded / event.detail.total) * 100);
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var bar = document.getElementById("upload-progress");
    if (bar && event.target && event.target.id === "upload" && event.detail.successful) {
      bar.value = 100;
    }
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var bar = document.getElementById("upload-progress");
    if (bar && event.target && event.target.id === "upload") {
      bar.value = 0;
    }
  });

  // Draws the graph an element carries in `data-graph` (Cytoscape elements).
  function drawGraph(element) {
    if (!window.cytoscape || element.dataset.drawn) {
      return;
    }
    var graph;
    try {
      graph = JSON.parse(element.dataset.graph);
    } catch (e) {
      return;
    }
    element.dataset.drawn = "1";
    window.cytoscape({
      container: element,
      elements: { nodes: graph.nodes, edges: graph.edges },
      style: [
        {
          selector: "node",
          style: {
            label: "data(label)",
            "background-color": "#2f5d8a",
            color: "#111",
            "font-size": 11,
            "text-valign": "bottom",
            "text-margin-y": 4,
            width: 18,
            height: 18
          }
        },
        {
          selector: "edge",
          style: {
            label: "data(label)",
            "curve-style": "bezier",
            "target-arrow-shape": "triangle",
            "line-color": "#7a8fa6",
            "target-arrow-color": "#7a8fa6",
            "font-size": 9,
            color: "#333",
            "text-rotation": "autorotate",
            width: 1.5
          }
        }
      ],
      layout: { name: "cose", animate: false, padding: 20 },
      userZoomingEnabled: true,
      wheelSensitivity: 0.3
    });
  }

  function init(root) {
    var graphs = (root || document).querySelectorAll("[data-graph]");
    for (var i = 0; i < graphs.length; i++) {
      drawGraph(graphs[i]);
    }
  }

  // A session belongs to the tab it was signed in in (and the tabs opened from that one, which
  // inherit its sessionStorage): signing in marks the tab, and a signed-in page in a tab without
  // the mark (a tab opened on its own, as after the first one was closed) ends the session.
  var TAB = "engram-console-tab";
  document.addEventListener(
    "submit",
    function (event) {
      if (event.target && event.target.id === "sign-in") {
        window.sessionStorage.setItem(TAB, "1");
      }
    },
    true
  );
  if (document.getElementById("sign-out") && !window.sessionStorage.getItem(TAB)) {
    var headers = {};
    try {
      headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    } catch (e) {
      headers = {};
    }
    window
      .fetch("/console/sign-out", { method: "POST", headers: headers, credentials: "same-origin" })
      .finally(function () {
        window.location.replace("/console");
      });
  }

  if (window.htmx) {
    window.htmx.onLoad(init);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      if (window.htmx) {
        window.htmx.onLoad(init);
      } else {
        init(document);
      }
    });
  }
})();
