"""attncheck's pytest plugin (entry point ``pytest11``; without an install: ``pytest -p attncheck.pytest_plugin``).

- The fixture ``attncheck_certify``: ``attncheck_certify(out, query, key, value, **check_attention's
  keywords)`` certifies, records the result under the running test and returns the Report (assert
  on it, or call ``attncheck_certify.require(...)``, which fails the test with the report's text).
  ``attncheck_certify.check_attention_varlen`` / ``.check_attention_kvcache`` do the same for
  FlashAttention's layouts.
- ``--attncheck-tier certified|statistical``: the tier that decides, unless a call passes ``tier=``.
- ``--attncheck-report DIR``: writes DIR/attncheck.json (every certification of the session: test,
  shape, precision, tier, worst band usage, verdict, its page), DIR/index.html (the same as a table)
  and one page per certification, DIR/certification-N.html (Report.to_html: where the error sits),
  linked from index.html. Checked writable when the session starts; an existing file of those names
  is replaced.
- The terminal summary lists every certification of the session.
"""

from __future__ import annotations

import html
import json
import os

import pytest

_RECORDS_KEY = pytest.StashKey[list]()


def pytest_addoption(parser):
    group = parser.getgroup("attncheck", "attncheck: certified attention checks")
    group.addoption("--attncheck-tier", choices=("certified", "statistical"), default=None,
                    help="the tier that decides the fixture's verdicts (default: check_attention's, certified)")
    group.addoption("--attncheck-report", metavar="DIR", default=None,
                    help="write attncheck.json and index.html of every certification into DIR")


def pytest_configure(config):
    config.stash[_RECORDS_KEY] = []
    directory = config.getoption("--attncheck-report", default=None)
    if directory:
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise pytest.UsageError(f"--attncheck-report: {directory} exists and is not a directory")
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK):
            raise pytest.UsageError(f"--attncheck-report: {directory} is not writable")


def _shape(x) -> str:
    return "x".join(str(n) for n in getattr(x, "shape", ())) or "?"


class _Certifier:
    """The fixture's value: callable like check_attention, recording each report."""

    def __init__(self, nodeid: str, records: list, tier, directory=None):
        self._nodeid, self._records, self._tier, self._directory = nodeid, records, tier, directory

    def _run(self, function, out, query, *args, **kwargs):
        if self._tier is not None:
            kwargs.setdefault("tier", self._tier)
        report = function(out, query, *args, **kwargs)
        self._records.append({"test": self._nodeid, "function": function.__name__, "out": _shape(out),
                              "query": _shape(query), "precision": report.precision, "tier": report.tier,
                              "max_band_usage": report.max_band_usage, "failures": report.failure_count,
                              "passed": bool(report.passed)})
        if self._directory:  # written now, so the session holds no report
            page = f"certification-{len(self._records)}.html"
            report.to_html(os.path.join(self._directory, page))
            self._records[-1]["html"] = page
        return report

    def __call__(self, out, query, key, value, **kwargs):
        import attncheck

        return self._run(attncheck.check_attention, out, query, key, value, **kwargs)

    def check_attention_varlen(self, out, query, key, value, **kwargs):
        import attncheck

        return self._run(attncheck.check_attention_varlen, out, query, key, value, **kwargs)

    def check_attention_kvcache(self, out, query, k_cache, v_cache, **kwargs):
        import attncheck

        return self._run(attncheck.check_attention_kvcache, out, query, k_cache, v_cache, **kwargs)

    def require(self, out, query, key, value, **kwargs):
        """Certify and fail the test with the report's text unless it passed."""
        report = self(out, query, key, value, **kwargs)
        if not report.passed:
            pytest.fail(str(report), pytrace=False)
        return report


@pytest.fixture
def attncheck_certify(request):
    """Certify attention outputs and record each verdict in the session's attncheck summary."""
    config = request.config
    return _Certifier(request.node.nodeid, config.stash[_RECORDS_KEY], config.getoption("--attncheck-tier"),
                      config.getoption("--attncheck-report"))


def _usage(x: float) -> str:
    return f"{x:.3g}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    records = config.stash.get(_RECORDS_KEY, [])
    if not records:
        return
    terminalreporter.section("attncheck certifications")
    for r in records:
        verdict = "passed" if r["passed"] else f"FAILED ({r['failures']} elements)"
        terminalreporter.write_line(f"{r['test']}: {r['function']} out {r['out']} {r['precision']} {r['tier']}, "
                                    f"worst band usage {_usage(r['max_band_usage'])}, {verdict}")
    failed = sum(not r["passed"] for r in records)
    terminalreporter.write_line(f"{len(records)} certification(s), {failed} failed")
    directory = config.getoption("--attncheck-report")
    if directory:
        _write_report(directory, records)
        terminalreporter.write_line(f"attncheck report: {os.path.join(directory, 'index.html')}")


def _write_report(directory: str, records: list) -> None:
    with open(os.path.join(directory, "attncheck.json"), "w", encoding="utf-8") as file:
        json.dump(records, file, indent=1)
        file.write("\n")
    columns = ("test", "function", "out", "query", "precision", "tier", "max_band_usage", "failures", "passed")
    def link(r):
        page = html.escape(r["html"], quote=True)
        return f"<td><a href=\"{page}\">{page}</a></td>"

    rows = "\n".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in columns) + link(r) + "</tr>"
                     for r in records)
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>attncheck certifications</title>"
            "<style>td,th{padding:2px 8px;border-bottom:1px solid #ccc;font-family:monospace}</style></head><body>"
            f"<h1>attncheck certifications</h1><table><tr>{''.join(f'<th>{c}</th>' for c in columns)}<th>page</th></tr>\n"
            f"{rows}\n</table></body></html>\n")
    with open(os.path.join(directory, "index.html"), "w", encoding="utf-8") as file:
        file.write(page)
