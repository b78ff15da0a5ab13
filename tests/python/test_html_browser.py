"""Report.to_html in headless Chromium: the picture of a kernel with a tile-boundary bug is drawn, and
drawn where the bug is. The kernel is a float64 numpy attention rounded to float32 whose second query
tile (queries 64..127) of head 1 drops key 63, the last key of the first key tile, in its first four
rows. The page's script marks what it drew (<body data-drawn>, each canvas's cell geometry), read
from --dump-dom; the pixels come from --screenshot, decoded here (zlib and struct: no imaging
library). Skipped, never passed, without Chromium."""

import re
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

import attncheck
from sdpa_reference import sdpa

B, H, L, S, E = 1, 2, 128, 128, 32
BUG_HEAD, BUG_QUERIES, DROPPED_KEY = 1, range(64, 68), 63
WINDOW = (1280, 1400)
FAILURE = (255, 0, 0)  # _html.FAILURE
BACKGROUND, NONE = (255, 255, 255), (217, 217, 217)  # the canvas's white, _html.NONE


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (scripts/bootstrap installs Debian's)")
    return path


def buggy_kernel():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, n, E)).astype(np.float32) for n in (L, S, S))
    out = sdpa(q, k, v, compute=np.float64).astype(np.float32)
    keep = np.ones((L, S), dtype=bool)
    keep[list(BUG_QUERIES), DROPPED_KEY] = False
    wrong = sdpa(q, k, v, attn_mask=keep, compute=np.float64).astype(np.float32)
    out[0, BUG_HEAD, list(BUG_QUERIES)] = wrong[0, BUG_HEAD, list(BUG_QUERIES)]
    return out, q, k, v


def run_chromium(browser, page, tmp_path, *action):
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               f"--user-data-dir={tmp_path / 'profile'}", *action, page.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"{command} failed ({result.returncode}):\n{result.stderr[-2000:]}"
    return result.stdout


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunks.setdefault(kind, []).append(data[at + 8:at + 8 + length])
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):  # PNG's five filters
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return width, height, rows


def canvases(dom):
    """{head: (left, top, cell side)} of the output's heatmaps, as the page's script recorded them."""
    found = {}
    for tag in re.findall(r"<canvas [^>]*>", dom):
        attributes = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
        if attributes.get("data-section") == "out":
            found[int(attributes["data-head"])] = tuple(
                int(attributes[f"data-{name}"]) for name in ("left", "top", "cell"))
    return found


def test_the_tile_boundary_bug_is_drawn_red_where_it_is(tmp_path):
    browser = chromium()
    report = attncheck.check_attention(*buggy_kernel())
    assert not report.passed
    assert {f.index[1] for f in report.failures} == {BUG_HEAD}
    assert {f.index[2] for f in report.failures} <= set(BUG_QUERIES)
    page = tmp_path / "report.html"
    report.to_html(page)

    dom = run_chromium(browser, page, tmp_path, "--dump-dom")
    assert re.search(r'<body[^>]*data-drawn="2"', dom), "the script did not draw both heatmaps"
    geometry = canvases(dom)
    assert sorted(geometry) == [0, 1]
    shot = tmp_path / "report.png"
    run_chromium(browser, page, tmp_path, f"--screenshot={shot}")
    width, height, pixels = read_png(shot)
    assert (width, height) == WINDOW

    grid = report.heatmap
    rows, columns = len(grid.query_edges) - 1, len(grid.column_edges) - 1
    assert (rows, columns) == (64, 32)  # two queries a cell row, a column a cell column
    bug_cells = {k for k in range(rows) if set(range(grid.query_edges[k], grid.query_edges[k + 1])) & set(BUG_QUERIES)}
    assert bug_cells == {32, 33}
    red = set()
    for head, (left, top, side) in geometry.items():
        assert top + rows * side < height, "the heatmap is below the screenshot"
        for r in range(rows):
            for c in range(columns):
                colour = pixels[top + r * side + side // 2][left + c * side + side // 2]
                if colour == FAILURE:
                    red.add((head, r, c))
                else:  # drawn on the usage scale: every row was certified
                    assert colour not in (BACKGROUND, NONE), (head, r, c, colour)
    failing = {(BUG_HEAD, r, c) for r in bug_cells for c in range(columns)
               if grid.cells[BUG_HEAD][r][c] > 1}
    assert len(failing) >= columns  # the stripe: most of rows 64..67's columns fail
    assert red == failing
