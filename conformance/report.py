"""The conformance report: backend-by-case-group, as JSON and Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from recallstack.conformance.twin import RECALL_TOLERANCE

GROUPS: dict[str, str] = {
    "test_lifecycle": "1. Index lifecycle",
    "test_upsert_query": "2. Upsert and query",
    "test_threshold": "3. Threshold",
    "test_filters": "4. Filters",
    "test_bad_input": "5. Bad input",
    "test_hostile_input": "5. Bad input",
    "test_update_delete": "6. Update and delete",
    "test_memory_metadata": "7. Memory metadata and recall",
    "test_recall_paths": "7. Memory metadata and recall",
    "test_storage": "8. Storage",
    "test_concurrency": "9. Concurrency",
    "test_scale": "10. Scale",
    "test_tenant_isolation": "11. Tenant isolation",
    "test_memory_lifecycle": "12. Memory lifecycle",
}
"""Case module → the group it reports to (two modules make up groups 5 and 7)."""
GROUP_NAMES = list(dict.fromkeys(GROUPS.values()))

Status = Literal["pass", "fail"]


class GroupResult(BaseModel):
    status: Status = "pass"
    passed: int = 0
    failed: int = 0
    unsupported: list[str] = Field(default_factory=list)
    """Operators or features the backend does not declare; the suite checked they raise."""


class TargetResult(BaseModel):
    backend: str
    kind: Literal["vector", "storage"]
    mode: str
    stand_in: str | None = None
    approximate: bool = False
    """Compared with the recall tolerance instead of exactly (no exact mode)."""
    groups: dict[str, GroupResult] = Field(default_factory=dict)

    def record(self, group: str, passed: bool, unsupported: list[str]) -> None:
        result = self.groups.setdefault(group, GroupResult())
        if passed:
            result.passed += 1
        else:
            result.failed += 1
            result.status = "fail"
        result.unsupported = sorted({*result.unsupported, *unsupported})


class Report(BaseModel):
    targets: list[TargetResult] = Field(default_factory=list)

    def target(
        self, backend: str, kind: Any, mode: str, stand_in: str | None, approximate: bool = False
    ) -> TargetResult:
        for t in self.targets:
            if (t.backend, t.kind, t.mode) == (backend, kind, mode):
                return t
        t = TargetResult(
            backend=backend, kind=kind, mode=mode, stand_in=stand_in, approximate=approximate
        )
        self.targets.append(t)
        return t

    @property
    def passed(self) -> bool:
        return all(g.status == "pass" for t in self.targets for g in t.groups.values())

    def write(self, path: Path) -> None:
        text = self.markdown() if path.suffix == ".md" else self.model_dump_json(indent=2) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    @classmethod
    def merge(cls, paths: list[Path]) -> Report:
        merged = cls()
        for path in paths:
            merged.targets.extend(cls.model_validate_json(path.read_text()).targets)
        merged.targets.sort(key=lambda t: (t.backend, t.kind, t.mode))
        return merged

    def markdown(self) -> str:
        """The matrix: one row per backend, kind and mode; one column per case group."""
        header = ["backend", "kind", "mode", *(g.split(". ")[0] for g in GROUP_NAMES)]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        notes: dict[str, None] = {}  # one line per backend, kind and group, in order
        for t in self.targets:
            cells = []
            for group in GROUP_NAMES:
                result = t.groups.get(group)
                if result is None:
                    cells.append("n/a")
                else:
                    cells.append(result.status + (" ¹" if result.unsupported else ""))
                    if result.unsupported:
                        note = f"{t.backend} ({t.kind}), {group}: {', '.join(result.unsupported)}"
                        notes[note] = None
            mode = t.mode + (f" — stand-in: {t.stand_in}" if t.stand_in else "")
            if t.approximate:
                mode += " ≈"
            lines.append("| " + " | ".join([t.backend, t.kind, mode, *cells]) + " |")
        legend = ", ".join(GROUP_NAMES)
        lines += [
            "",
            f"Groups: {legend}.",
            "n/a: the group does not apply to this kind. "
            f"≈ approximate search: recall ≥ {RECALL_TOLERANCE} of the exact top-K.",
        ]
        if notes:
            lines += ["", "¹ Unsupported, and checked to raise the documented error:"]
            lines += [f"- {n}" for n in notes]
        return "\n".join(lines) + "\n"
