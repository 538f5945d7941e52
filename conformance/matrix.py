"""Merge per-backend conformance reports into the matrix and its table in the docs.

    python -m recallstack.conformance.matrix reports/*.json --matrix docs/conformance.json \
        --page docs/backends/conformance.md [--check]

With `--check` nothing is written: it fails when the committed matrix or table
differs from the fresh reports (CI uses this, so the docs cannot lie).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recallstack.conformance.report import Report

BEGIN, END = "<!-- conformance:begin -->", "<!-- conformance:end -->"


def with_table(page: str, report: Report) -> str:
    """The page's text with the table between the markers replaced."""
    head, found, rest = page.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"the page lacks the {BEGIN} … {END} markers")
    return f"{head}{BEGIN}\n{report.markdown()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--matrix", type=Path, required=True)
    parser.add_argument("--page", type=Path, required=True)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)

    merged = Report.merge(args.reports)
    matrix_text = merged.model_dump_json(indent=2) + "\n"
    page_text = with_table(args.page.read_text(), merged)
    print(merged.markdown())
    if not merged.passed:
        print("conformance: some backend fails a case group", file=sys.stderr)
        return 1
    if args.check:
        stale = [
            str(path)
            for path, text in ((args.matrix, matrix_text), (args.page, page_text))
            if not path.exists() or path.read_text() != text
        ]
        if stale:
            print(
                f"conformance: {', '.join(stale)} differ from this run; "
                "run `nox -s conformance` locally and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    args.matrix.parent.mkdir(parents=True, exist_ok=True)
    args.matrix.write_text(matrix_text)
    args.page.write_text(page_text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
