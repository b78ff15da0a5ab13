#!/usr/bin/env python3
"""Checks `attncheck verify --junit FILE` output: well-formed XML, the campaign's five stages as
suites, each suite's counts matching its testcases, a testcase per property run, no failure in a
passing campaign. Usage: junit_check.py FILE. Exit 0 when all holds."""
import sys
import xml.etree.ElementTree as ET

STAGES = ["samples", "properties", "oracle agreement", "fuzz corpora", "stress"]


def main():
    root = ET.parse(sys.argv[1]).getroot()
    problems = []
    if root.tag != "testsuites":
        problems.append(f"root is <{root.tag}>, expected <testsuites>")
    suites = root.findall("testsuite")
    names = [s.get("name") for s in suites]
    if names != STAGES:
        problems.append(f"suites {names}, expected {STAGES}")
    total = 0
    for suite in suites:
        cases = suite.findall("testcase")
        total += len(cases)
        failures = sum(1 for c in cases if c.find("failure") is not None)
        if int(suite.get("tests")) != len(cases) or int(suite.get("failures")) != failures:
            problems.append(f"suite {suite.get('name')}: counts {suite.get('tests')}/{suite.get('failures')} "
                            f"but {len(cases)} cases, {failures} failed")
        if failures:
            problems.append(f"suite {suite.get('name')}: {failures} failures in a passing campaign")
    properties = [s for s in suites if s.get("name") == "properties"]
    if properties and len(properties[0].findall("testcase")) < 10:
        problems.append("the properties suite lists fewer than 10 cases: property runs are missing")
    if int(root.get("tests", -1)) != total:
        problems.append(f"testsuites tests={root.get('tests')} but {total} cases")
    for problem in problems:
        print("junit_check:", problem)
    print(f"junit_check: {len(suites)} suites, {total} testcases" + (": ok" if not problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
