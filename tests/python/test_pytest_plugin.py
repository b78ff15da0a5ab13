"""attncheck's pytest plugin: the attncheck_certify fixture records every certification, the
terminal summary lists them (test, shape, precision, tier, worst band usage, verdict),
--attncheck-tier decides the tier, --attncheck-report DIR writes attncheck.json, index.html and one
linked page per certification, and a report directory that is a file is a usage error."""

import json

pytest_plugins = ["pytester"]

TESTS = '''
import numpy as np

def problem():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 5, 8)).astype(np.float32) for _ in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(8))
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True) @ v).astype(np.float32), q, k, v

def test_right(attncheck_certify):
    out, q, k, v = problem()
    assert attncheck_certify(out, q, k, v).passed

def test_wrong(attncheck_certify):
    out, q, k, v = problem()
    attncheck_certify.require(out * np.float32(1.001), q, k, v)
'''


def test_the_fixture_records_and_the_summary_lists_every_certification(pytester):
    pytester.makepyfile(test_kernel=TESTS)
    result = pytester.runpytest_subprocess("-p", "attncheck.pytest_plugin", "--attncheck-tier", "statistical",
                                "--attncheck-report", "reports")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "attncheck certifications" in text
    result.stdout.fnmatch_lines(["*test_kernel.py::test_right: check_attention out 1x2x5x8 fp32 statistical, "
                                 "worst band usage *, passed",
                                 "*test_kernel.py::test_wrong: check_attention out 1x2x5x8 fp32 statistical, "
                                 "worst band usage *, FAILED (* elements)",
                                 "2 certification(s), 1 failed"])
    assert "attncheck: FAILED (fp32)" in text  # require() fails the test with the report's text
    records = json.loads((pytester.path / "reports" / "attncheck.json").read_text())
    assert [r["passed"] for r in records] == [True, False] and all(r["tier"] == "statistical" for r in records)
    assert records[0]["max_band_usage"] < 1 < records[1]["max_band_usage"]
    page = (pytester.path / "reports" / "index.html").read_text()
    assert page.count("<tr>") == 3 and "test_kernel.py::test_wrong" in page
    assert [r["html"] for r in records] == ["certification-1.html", "certification-2.html"]
    for record in records:  # one page per certification, linked from the index
        assert f'<a href="{record["html"]}">' in page
        picture = (pytester.path / "reports" / record["html"]).read_text()
        assert picture.count('<canvas class="heatmap"') == 2
        assert ("outside band" in picture) == (not record["passed"])


def test_the_default_tier_is_certified_and_a_file_as_report_directory_is_refused(pytester):
    pytester.makepyfile(test_kernel=TESTS)
    result = pytester.runpytest_subprocess("-p", "attncheck.pytest_plugin", "-k", "right")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["* fp32 certified, worst band usage *, passed", "1 certification(s), 0 failed"])
    (pytester.path / "taken").write_text("a user's file")
    refused = pytester.runpytest_subprocess("-p", "attncheck.pytest_plugin", "--attncheck-report", "taken")
    assert refused.ret == 4  # pytest's usage error
    assert "--attncheck-report: taken exists and is not a directory" in refused.stderr.str()
    assert (pytester.path / "taken").read_text() == "a user's file"
