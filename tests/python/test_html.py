"""Report.to_html without a browser: one self-contained page (no network: no src or href to another
file or host, no <link>), its heatmap data is the report's, the failures table names the failures, the
LSE gets its own section, and writing errors are OSErrors. Report.heatmap survives the JSON round trip.
tests/python/test_html_browser.py renders the page in Chromium."""

import json
import math
import re

import numpy as np
import pytest

import attncheck
from sdpa_reference import sdpa


def problem():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 6, 8)).astype(np.float32) for _ in range(3))
    return q, k, v


def failing_report(**kwargs):
    q, k, v = problem()
    mask = np.ones((6, 6), dtype=bool)
    mask[5] = False  # query 5 sees no key: its output must be exactly zero
    out = sdpa(q, k, v, attn_mask=mask)
    out[1, 2, 3, 4] += np.float32(1e-3)
    out[0, 1, 5, 0] = np.float32(0.5)  # a masked row not zero: decided without a band
    return attncheck.check_attention(out, q, k, v, attn_mask=mask, **kwargs)


def embedded(page, section="out"):
    match = re.search(rf'<script type="application/json" id="data-{section}">(.*?)</script>', page, re.S)
    assert match, f"no data-{section} in the page"
    return json.loads(match.group(1))


def test_the_page_is_self_contained_and_holds_the_heatmap_and_failures(tmp_path):
    report = failing_report()
    assert not report.passed and report.failure_count == 2
    path = tmp_path / "report.html"
    report.to_html(path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=""", page, re.I), "the page loads another file"
    assert "<link" not in page and "@import" not in page and not re.search(r"url\(", page)
    assert page.count('<canvas class="heatmap"') == 3  # one per query head
    data = embedded(page)
    grid = report.heatmap.array()
    assert grid.shape == (3, 6, 8) and data["query_edges"] == list(range(7)) and data["column_edges"] == list(range(9))
    cells = np.array([[[math.inf if x == "inf" else x for x in row] for row in head] for head in data["cells"]])
    np.testing.assert_allclose(cells, grid, rtol=1e-3)  # 4 digits in the page
    np.testing.assert_array_equal(cells > 1, grid > 1)
    np.testing.assert_array_equal(cells == -1, grid == -1)
    assert grid[2, 3, 4] > 1 and math.isinf(grid[1, 5, 0])  # the failures, above 1
    assert (grid[:, 5, :][~np.isinf(grid[:, 5, :])] == -1).all()  # the keyless row: nothing certified there
    table = page[page.index('<table class="failures">'):]
    assert "(1, 2, 3, 4)" in table and "(0, 1, 5, 0)" in table and "masked row not zero" in table
    assert "outside band" in table
    histogram = page[page.index('<table class="histogram">'):]
    assert "&gt; 1</td><td class=\"n\">1</td>" in histogram  # one element above its band
    assert "FAILED (fp32): 2 of 288 elements" in page  # the summary


def test_the_lse_has_its_own_section_and_a_passed_report_no_failures(tmp_path):
    q, k, v = problem()
    scores = (q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)) / np.sqrt(8)
    top = scores.max(-1)
    lse = (top + np.log(np.exp(scores - top[..., None]).sum(-1))).astype(np.float32)
    report = attncheck.check_attention(sdpa(q, k, v), q, k, v, lse=lse)
    assert report.passed
    report.to_html(tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "The log-sum-exp" in page and page.count('<canvas class="heatmap"') == 6
    assert len(embedded(page, "lse")["cells"][0][0]) == 1  # the LSE's grid has one column
    assert "<h3>Failures</h3><p>None.</p>" in page


def test_writing_errors_are_os_errors_and_a_directory_is_never_replaced(tmp_path):
    report = failing_report()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        report.to_html(tmp_path)
    assert tmp_path.is_dir()
    with pytest.raises(FileNotFoundError):
        report.to_html(tmp_path / "missing" / "r.html")
    (tmp_path / "old.html").write_text("old")
    report.to_html(str(tmp_path / "old.html"))  # a file is replaced
    assert "<canvas" in (tmp_path / "old.html").read_text()


def test_the_heatmap_survives_json_and_a_report_without_one_renders(tmp_path):
    report = failing_report(rows=4, seed=1)
    grid = report.heatmap.array()
    assert (grid == -1).any() and np.isinf(grid).any()  # rows not sampled, and the masked-row failure
    again = attncheck.Report.from_json(report.to_json())
    assert again == report and again.heatmap == report.heatmap
    again.heatmap = None  # as the gradients' reports: histogram and failures only
    again.to_html(tmp_path / "plain.html")
    page = (tmp_path / "plain.html").read_text(encoding="utf-8")
    assert "<canvas" not in page and '<table class="failures">' in page
