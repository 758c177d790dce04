"""The live triage: primary finding first, evidence and the suggested flag change."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from vtop.core.rules.engine import Finding, Triage
from vtop.core.session.session import short_key
from vtop.core.status import Status
from vtop.text.report import flag_diff

SEVERITY_STYLE = {Status.CRITICAL: "bold reverse", Status.WARNING: "bold", Status.INFO: "dim"}


def is_primary(index: int, finding: Finding) -> bool:
    """The first finding is the primary one unless it is only informational."""
    return index == 0 and finding.rule.severity != "info"


def finding_prompt(finding: Finding, primary: bool) -> Text:
    """A few lines: severity, id and title, the first flag change (both halves of its diff,
    before the diagnosis, so a short panel still shows them), then the diagnosis."""
    rule = finding.rule
    text = Text()
    head = (
        f"{'PRIMARY ' if primary else ''}{rule.severity.upper()} {short_key(finding)} {rule.title}"
    )
    text.append(head, style=SEVERITY_STYLE.get(Status(rule.severity), ""))
    for change in finding.changes[:1]:
        text.append("\n" + "\n".join(line.strip() for line in flag_diff(change)), style="bold")
    text.append("\n" + finding.diagnosis)
    if finding.symptoms:
        text.append(f"\nexplains {', '.join(s.rule.id for s in finding.symptoms)}", style="dim")
    return text


class FindingsPanel(OptionList):
    """Selectable findings; the app explains the highlighted one on `e`."""

    def __init__(self) -> None:
        super().__init__(id="findings", classes="panel")
        self.border_title = "Findings"
        self.findings: list[Finding] = []
        self._shown: tuple[tuple[str, ...], str | None] | None = None

    def show(
        self, triage: Triage | None, reason: str | None = None, stale: str | None = None
    ) -> None:
        """Replace the list, keeping the highlighted finding when it is still there; when the
        data stopped, the title says the findings are the last ones seen."""
        if stale and triage is not None:
            self.border_title = f"Findings: {stale}, last seen"
        else:
            self.border_title = f"Findings: {stale}" if stale else "Findings"
        findings = list(triage.findings) if triage is not None else []
        texts = tuple(finding_prompt(f, is_primary(i, f)).plain for i, f in enumerate(findings))
        key = (texts, reason if not findings else None)
        if key == self._shown:
            self.findings = findings
            return
        self._shown = key
        if [f.key for f in findings] == [f.key for f in self.findings] and findings:
            self.findings = findings
            for index, finding in enumerate(findings):
                self.replace_option_prompt_at_index(
                    index, finding_prompt(finding, is_primary(index, finding))
                )
            return
        self.findings = findings
        self.clear_options()
        if not findings:
            self.add_option(Option(Text(reason or "No finding: nothing to act on.", "dim")))
            return
        self.add_options(
            Option(finding_prompt(f, is_primary(i, f)), id=f.key) for i, f in enumerate(findings)
        )
        self.highlighted = 0

    @property
    def selected(self) -> Finding | None:
        """The highlighted finding."""
        index = self.highlighted
        if index is None or index >= len(self.findings):
            return None
        return self.findings[index]
