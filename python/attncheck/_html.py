"""Report.to_html: one self-contained HTML page (inline CSS and JS, no network) that shows where the
error sits. Per query head, a heatmap of the band usage |got - exact| / band over (query, output
column) on a log colour scale, failures (usage > 1) in red; the usage histogram; the failures table;
the summary and notes; the same for the LSE's report when there is one.

Each heatmap is an inline <canvas> drawn by the page's script from the JSON it embeds; after drawing,
the script sets ``data-drawn`` on <body> (the number of heatmaps drawn) and, on each canvas, where its
cells are (``data-left``, ``data-top``: page pixels of cell (0, 0); ``data-cell``: a cell's side).
"""

from __future__ import annotations

import errno
import html
import json
import math
import os

#: Colours of the scale: viridis stops from usage 1e-12 (and exact 0) to 1, then what is not on it.
SCALE = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")
FAILURE = "#ff0000"  #: usage above 1 (or a failure decided without a band)
NONE = "#d9d9d9"  #: nothing certified in the cell
DECADES = 12  #: the scale spans 1e-12 .. 1, as the usage histogram does

_STYLE = """
body{font-family:sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px} h2{font-size:17px;margin:18px 0 6px} h3{font-size:14px;margin:4px 0}
.verdict{font-weight:bold} .failed{color:#c00000} .passed{color:#006000}
.heads{display:flex;flex-wrap:wrap;gap:12px} figure{margin:0} figcaption{font-size:12px}
canvas{display:block}
.legend{display:flex;align-items:center;gap:10px;font-size:12px;margin:4px 0 8px}
.scale{width:240px;height:12px;background:linear-gradient(to right,SCALE)}
.ticks{display:flex;justify-content:space-between;width:240px;font-size:11px}
.swatch{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:3px}
table{border-collapse:collapse;font-size:12px} td,th{padding:2px 8px;border-bottom:1px solid #ccc;text-align:left}
td.n{text-align:right;font-family:monospace} .bar{background:#3b528b;height:10px}
pre{background:#f4f4f4;padding:8px;white-space:pre-wrap;font-size:12px}
.hover{font-size:12px;font-family:monospace;min-height:1.3em}
""".replace("SCALE", ",".join(SCALE))

# Draws every <canvas class="heatmap"> from the JSON of <script id=data-SECTION>. Cells are
# axis-aligned integer rectangles, so each cell is one flat colour (no anti-aliasing).
_SCRIPT = r"""
(function () {
  var SCALE = %(scale)s, FAILURE = "%(failure)s", NONE = "%(none)s", DECADES = %(decades)d;
  var MARGIN_LEFT = 56, MARGIN_TOP = 6, MARGIN_BOTTOM = 34;
  function rgb(hex) { return [1, 3, 5].map(function (k) { return parseInt(hex.substr(k, 2), 16); }); }
  var stops = SCALE.map(rgb);
  function colour(u) {
    if (u === "inf" || u > 1) return FAILURE;
    if (u < 0) return NONE;
    var t = u > 0 ? Math.min(1, Math.max(0, (Math.log10(u) + DECADES) / DECADES)) : 0;
    var x = t * (stops.length - 1), k = Math.min(stops.length - 2, Math.floor(x)), f = x - k;
    var c = [0, 1, 2].map(function (n) { return Math.round(stops[k][n] + f * (stops[k + 1][n] - stops[k][n])); });
    return "rgb(" + c.join(",") + ")";
  }
  function text(u) { return u === "inf" ? "failure (no band)" : u < 0 ? "not certified" : u.toPrecision(3); }
  var drawn = 0;
  document.querySelectorAll("canvas.heatmap").forEach(function (canvas) {
    var data = JSON.parse(document.getElementById("data-" + canvas.dataset.section).textContent);
    var head = Number(canvas.dataset.head), cells = data.cells[head];
    var rows = cells.length, columns = cells[0].length, side = data.cell;
    var g = canvas.getContext("2d");
    g.fillStyle = "#ffffff"; g.fillRect(0, 0, canvas.width, canvas.height);
    for (var r = 0; r < rows; r++)
      for (var c = 0; c < columns; c++) {
        g.fillStyle = colour(cells[r][c]);
        g.fillRect(MARGIN_LEFT + c * side, MARGIN_TOP + r * side, side, side);
      }
    // Axes: the real query and column indices at cell edges, about eight of each.
    g.fillStyle = "#222"; g.strokeStyle = "#222"; g.font = "10px sans-serif";
    var width = columns * side, height = rows * side;
    g.strokeRect(MARGIN_LEFT - 0.5, MARGIN_TOP - 0.5, width + 1, height + 1);
    g.textAlign = "right"; g.textBaseline = "middle";
    var step = Math.max(1, Math.ceil(rows / 8));
    for (var k = 0; k <= rows; k += (k + step > rows && k < rows) ? rows - k : step)
      g.fillText(String(data.query_edges[k]), MARGIN_LEFT - 4, MARGIN_TOP + k * side);
    g.textAlign = "center"; g.textBaseline = "top";
    step = Math.max(1, Math.ceil(columns / 8));
    for (var k = 0; k <= columns; k += (k + step > columns && k < columns) ? columns - k : step)
      g.fillText(String(data.column_edges[k]), MARGIN_LEFT + k * side, MARGIN_TOP + height + 3);
    g.fillText(data.column_label, MARGIN_LEFT + width / 2, MARGIN_TOP + height + 18);
    g.save(); g.translate(10, MARGIN_TOP + height / 2); g.rotate(-Math.PI / 2);
    g.textBaseline = "middle"; g.fillText("query", 0, 0); g.restore();
    var box = canvas.getBoundingClientRect();
    canvas.dataset.left = String(Math.round(box.left + window.scrollX) + MARGIN_LEFT);
    canvas.dataset.top = String(Math.round(box.top + window.scrollY) + MARGIN_TOP);
    canvas.dataset.cell = String(side);
    var hover = document.getElementById("hover-" + canvas.dataset.section + "-" + head);
    canvas.addEventListener("mousemove", function (event) {
      var b = canvas.getBoundingClientRect();
      var c = Math.floor((event.clientX - b.left - MARGIN_LEFT) / side);
      var r = Math.floor((event.clientY - b.top - MARGIN_TOP) / side);
      if (r < 0 || c < 0 || r >= rows || c >= columns) { hover.textContent = ""; return; }
      hover.textContent = "queries " + data.query_edges[r] + ".." + (data.query_edges[r + 1] - 1) + ", columns " +
        data.column_edges[c] + ".." + (data.column_edges[c + 1] - 1) + ": " + text(cells[r][c]);
    });
    drawn++;
  });
  document.body.dataset.drawn = String(drawn);
})();
""" % {"scale": json.dumps(list(SCALE)), "failure": FAILURE, "none": NONE, "decades": DECADES}

_MARGIN_LEFT, _MARGIN_TOP, _MARGIN_BOTTOM = 56, 6, 34  # as the script's


def write_html(report, path) -> None:
    """Writes `report` as one HTML page at `path` (replacing a file there, never a directory)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write the report to", path)
    page = render(report)
    with open(path, "w", encoding="utf-8") as file:  # OSError (missing folder, no permission) names the path
        file.write(page)


def render(report) -> str:
    """The page, as text."""
    verdict = str(report).splitlines()[0]
    state = "passed" if report.passed else "failed"
    sections = [_section(report, "out", "The output")]
    if report.lse is not None:
        sections.append(_section(report.lse, "lse", "The log-sum-exp"))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.notes)
    diagnosis = f"<p>Diagnosis: {html.escape(report.diagnosis())}</p>" if report.diagnosis() else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attncheck report</title>"
            f"<style>{_STYLE}</style></head>\n<body>\n<h1>attncheck report</h1>\n"
            f"<p class=\"verdict {state}\">{html.escape(verdict)}</p>\n{diagnosis}"
            + "\n".join(sections) +
            f"\n<h2>Summary</h2>\n<pre>{html.escape(str(report))}</pre>\n"
            + (f"<h3>Notes</h3><ul>{notes}</ul>\n" if notes else "")
            + f"<script>{_SCRIPT}</script>\n</body></html>\n")


def _section(report, name: str, title: str) -> str:
    parts = [f"<h2>{title}</h2>"]
    if report.heatmap is not None:
        parts.append(_heatmaps(report.heatmap, name, "output column" if name == "out" else "the row's LSE"))
    parts.append(_histogram(report.usage_histogram))
    parts.append(_failures(report))
    return "\n".join(parts)


def _legend() -> str:
    ticks = "".join(f"<span>{'1' if e == 0 else f'1e{e}'}</span>" for e in range(-DECADES, 1, 3))
    return ("<div class=\"legend\"><div><div class=\"scale\"></div><div class=\"ticks\">" + ticks + "</div>"
            "<div style=\"font-size:11px\">|got − exact| / band (log scale; 0 at the left end)</div></div>"
            f"<span><span class=\"swatch\" style=\"background:{FAILURE}\"></span>&gt; 1: outside the band (a failure)"
            f"</span><span><span class=\"swatch\" style=\"background:{NONE}\"></span>not certified</span></div>")


def _heatmaps(heatmap, name: str, column_label: str) -> str:
    heads, rows, columns = len(heatmap.cells), len(heatmap.query_edges) - 1, len(heatmap.column_edges) - 1
    side = max(3, min(16, 512 // max(rows, columns, 1)))  # a cell's side in pixels: about 512 at most
    # At least 150 pixels wide, so the column axis's label fits under a one-column grid (an LSE's).
    width, height = max(150, _MARGIN_LEFT + columns * side + 12), _MARGIN_TOP + rows * side + _MARGIN_BOTTOM
    cells = [[[_cell(x) for x in row] for row in head] for head in heatmap.cells]
    data = json.dumps({"cells": cells, "query_edges": heatmap.query_edges, "column_edges": heatmap.column_edges,
                       "cell": side, "column_label": column_label}, allow_nan=False).replace("</", "<\\/")
    figures = "".join(
        f"<figure><figcaption>query head {h}</figcaption><canvas class=\"heatmap\" id=\"heatmap-{name}-{h}\" "
        f"data-section=\"{name}\" data-head=\"{h}\" width=\"{width}\" height=\"{height}\" "
        f"style=\"width:{width}px;height:{height}px\"></canvas><div class=\"hover\" id=\"hover-{name}-{h}\"></div>"
        "</figure>" for h in range(heads))
    return (f"<h3>Band usage per query head (max over batch items; {rows} × {columns} cells over "
            f"{heatmap.query_edges[-1]} queries × {heatmap.column_edges[-1]} columns)</h3>\n" + _legend() +
            f"\n<script type=\"application/json\" id=\"data-{name}\">{data}</script>\n"
            f"<div class=\"heads\">{figures}</div>")


def _cell(usage: float):
    """A cell as the page's JSON holds it: 4 digits are enough for the colour and the hover text (a
    third of full precision's bytes), a usage above 1 kept whole so it stays above 1; "inf" for +inf."""
    if math.isinf(usage):
        return "inf"
    return usage if usage > 1 or usage <= 0 else float(f"{usage:.4g}")


def _histogram(histogram) -> str:
    # The first decade holds every usage below 1e-11 (report_of clamps them there).
    labels = (["0", f"(0, 1e{1 - DECADES})"] + [f"[1e{e}, 1e{e + 1})" for e in range(1 - DECADES, -1)] +
              ["[0.1, 1]", "> 1"])
    most = max(histogram) if histogram else 0
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td class=\"n\">{count}</td><td><div class=\"bar\" style=\"width:"
        f"{0 if not most else max(1 if count else 0, round(300 * count / most))}px"
        f"{';background:' + FAILURE if label == '> 1' else ''}\"></div></td></tr>"
        for label, count in zip(labels, histogram))
    return (f"<h3>Band usage histogram (certified elements)</h3>\n<table class=\"histogram\"><tr><th>usage</th>"
            f"<th>elements</th><th></th></tr>{rows}</table>")


def _failures(report) -> str:
    if not report.failures:
        return "<h3>Failures</h3><p>None.</p>"
    rows = "".join(
        f"<tr><td class=\"n\">{html.escape(str(f.index))}</td><td class=\"n\">{f.got:.9g}</td>"
        f"<td class=\"n\">{f.exact:.9g}</td><td class=\"n\">{f.band:.3g}</td><td class=\"n\">{f.ulps:.3g}</td>"
        f"<td>{html.escape(f.reason)}</td></tr>" for f in report.failures)
    kept = (f" (the worst {len(report.failures)} of {report.failure_count})"
            if len(report.failures) < report.failure_count else f" ({report.failure_count})")
    return (f"<h3>Failures{kept}</h3>\n<table class=\"failures\"><tr><th>index</th><th>got</th><th>exact</th>"
            f"<th>band</th><th>ulps</th><th>reason</th></tr>{rows}</table>")
