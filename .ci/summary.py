"""Print the closing line of a CI run: the tests counted over every pytest session's JUnit report.

Each pytest session of the noxfile writes reports/junit-<session>.xml; nox's own
summary names sessions, not tests. Exits 1 when no report or no test is found,
so a run that executed nothing cannot pass.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
reports = sorted(Path("reports").glob("junit-*.xml"))
for report in reports:
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
print(f"{len(reports)} pytest sessions")
print(f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped")
sys.exit(0 if reports and passed and not failed else 1)
