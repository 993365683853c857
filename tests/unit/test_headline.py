"""The last line of plan, apply and audit says what happened, never "No changes" over
hosts that were never looked at (issue 39)."""

from __future__ import annotations

from provision.commands.plan_output import Change, Section, count_line, exit_status
from provision.headline import apply_line, audit_line, plan_line

NONE = {"add": 0, "change": 0, "destroy": 0}
SOME = {"add": 1, "change": 2, "destroy": 0}


def test_a_plan_where_everything_was_planned_reads_as_before() -> None:
    assert plan_line(NONE, [], 3) == "No changes."
    assert plan_line(SOME, [], 3) == "Plan: 1 to add, 2 to change, 0 to destroy."


def test_nothing_planned_says_so_with_how_many_and_why() -> None:
    assert plan_line(NONE, ["unreachable"] * 3, 3) == "Nothing could be planned: 3 hosts unreachable."
    assert plan_line(NONE, ["unreachable"], 1) == "Nothing could be planned: 1 host unreachable."
    assert (plan_line(NONE, ["failed", "unreachable", "unreachable"], 3)
            == "Nothing could be planned: 2 hosts unreachable, 1 failed.")
    assert plan_line(NONE, ["refused"], 1, "zone") == "Nothing could be planned: 1 zone refused."


def test_a_partial_plan_leads_with_what_could_not_be_planned() -> None:
    line = plan_line(NONE, ["unreachable", "unreachable"], 3)
    assert line == "2 of 3 hosts could not be planned (2 unreachable). No changes on the other 1."
    assert not line.startswith("No changes")
    assert (plan_line(SOME, ["failed"], 2)
            == "1 of 2 hosts could not be planned (1 failed). "
               "Plan for the other 1: 1 to add, 2 to change, 0 to destroy.")


def test_the_count_line_counts_sections_and_leaves_out_asides() -> None:
    secs = [Section("gpu1", error="cannot connect", status="unreachable"),
            Section("gpu2", (Change("+", "x"),)),
            Section("change guard", notes=("a note",), aside=True)]
    assert count_line(secs) == ("1 of 2 hosts could not be planned (1 unreachable). "
                                "Plan for the other 1: 1 to add, 0 to change, 0 to destroy.")
    assert exit_status(secs, detailed_exitcode=False) == 1
    # a failure without a status word is "failed"
    assert count_line([Section("zone a", error="boom")], "zone") == (
        "Nothing could be planned: 1 zone failed.")


def test_apply_says_what_it_applied_to() -> None:
    assert apply_line(["ok", "changed", "ok"]) == "Applied: 3 hosts converged, 1 changed."
    assert apply_line(["unreachable"] * 3) == "Nothing could be applied: 3 hosts unreachable."
    assert (apply_line(["changed", "failed", "unreachable"])
            == "Applied to 1 of 3 hosts; not to 2 (1 failed, 1 unreachable).")


def test_audit_counts_only_the_hosts_it_reached() -> None:
    assert audit_line(3, 0, 1.234, "none") == "audited 3 hosts in 1.23 s (security groups: none)"
    assert (audit_line(3, 3, 0.04, "none")
            == "nothing could be audited: 3 hosts unreachable (0.04 s; security groups: none)")
    assert (audit_line(3, 1, 0.5, "aws")
            == "audited 2 of 3 hosts in 0.50 s, 1 unreachable (security groups: aws)")
