"""Answer checks: what done(answer=...) and fail(reason=...) say, read deterministically, with evidence."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weavegym.core.trajectory import EpisodeEnd, FrameRecord, StepRecord, Trajectory
from weavegym.envs.actions import parse_action, tool_schema
from weavegym.evaluators.answers import (
    MAX_NAMED_CANDIDATES,
    check_abstention,
    check_date,
    check_items,
    check_number,
    check_text,
    extract_answer,
    name_tokens,
    named_candidates,
    named_causes,
    named_limit,
    parse_date,
    parse_quantity,
    split_items,
)
from weavegym.evaluators.scoring import Outcome

SCREEN = (640, 480)


@pytest.mark.parametrize(("text", "expected"), [
    ("42", (42.0, "")),
    ("The total is 1,234.50 EUR.", (1234.5, "eur")),
    ("$1,234.50", (1234.5, "usd")),
    ("−3.5 %", (-3.5, "%")),
    ("1 048 576 bytes", (1048576.0, "bytes")),
    ("12\u202f345", (12345.0, "")),
    ("2.5e3 ms", (2500.0, "ms")),
    ("about 3 sheep", (3.0, "")),
    ("<answer>7 GiB</answer> (I think 8 at first)", (7.0, "gib")),
    ("no digits here", None),
])
def test_quantities_are_read_with_their_units(text: str, expected: tuple[float, str] | None) -> None:
    assert parse_quantity(text) == expected


def test_numbers_compare_with_tolerance_and_unit_conversion() -> None:
    assert check_number("1.5 KiB", 1536, unit="B").outcome == Outcome.SATISFIED
    assert check_number("1536", 1536, unit="B").outcome == Outcome.SATISFIED  # no unit: the expected one
    assert check_number("90 min", 1.5, unit="h").outcome == Outcome.SATISFIED
    assert check_number("2237.57", 2237.571, abs_tol=0.005).outcome == Outcome.SATISFIED
    assert check_number("2237.6", 2237.571, abs_tol=0.005).outcome == Outcome.FAILED
    assert check_number("101", 100, rel_tol=0.02).outcome == Outcome.SATISFIED
    wrong_kind = check_number("3 seconds", 3, unit="MB")
    assert wrong_kind.outcome == Outcome.FAILED and "not a unit of bytes" in wrong_kind.evidence
    evidence = check_number("I'd say 2236", 2237.57, abs_tol=0.005).evidence
    assert "2236" in evidence and "2237.57" in evidence  # both sides shown
    assert check_number("none", 5).outcome == Outcome.FAILED


def test_text_and_answer_tags() -> None:
    assert extract_answer("thinking... <answer> build-4821 </answer>") == "build-4821"
    assert extract_answer("<ANSWER>a</ANSWER> then <answer>b</answer>") == "b"  # the last one counts
    assert check_text('"Build-4821."', "build-4821").outcome == Outcome.SATISFIED
    assert check_text("ﬁle-A", ["file-a", "file a"]).outcome == Outcome.SATISFIED  # NFKC folds the ligature
    assert check_text("build-4822", "build-4821").outcome == Outcome.FAILED


def test_lists_as_sets_or_in_order_with_partial_credit() -> None:
    assert split_items("- alpha\n- Beta\n3. gamma") == ["alpha", "beta", "gamma"]
    assert split_items("alpha, beta and gamma; delta") == ["alpha", "beta", "gamma", "delta"]
    assert check_items("gamma, alpha, beta", ["alpha", "beta", "gamma"]).outcome == Outcome.SATISFIED
    assert check_items("gamma, alpha, beta", ["alpha", "beta", "gamma"], ordered=True).outcome == Outcome.PARTIAL
    assert check_items("alpha, beta, gamma", ["alpha", "beta", "gamma"], ordered=True).outcome == Outcome.SATISFIED
    some = check_items("alpha", ["alpha", "beta"])
    assert some.outcome == Outcome.PARTIAL and "'beta'" in some.evidence
    padded = check_items("alpha, beta, zeta", ["alpha", "beta"])  # an extra item is not partial credit
    assert padded.outcome == Outcome.FAILED and "'zeta'" in padded.evidence
    assert check_items("alpha, alpha", ["alpha"]).outcome == Outcome.FAILED  # multiset: duplicates count


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-02", dt.date(2026, 12, 2)),
    ("on 2 December 2026", dt.date(2026, 12, 2)),
    ("Dec 2, 2026", dt.date(2026, 12, 2)),
    ("the 2nd Dec. 2026", dt.date(2026, 12, 2)),
    ("25/12/2026", dt.date(2026, 12, 25)),
    ("12/25/2026", dt.date(2026, 12, 25)),
    ("03/04/2026", None),  # March 4th or 3 April: not read
    ("2026-02-30", None),
])
def test_dates_are_read_only_when_unambiguous(text: str, expected: dt.date | None) -> None:
    assert parse_date(text) == expected


def test_date_check_shows_both_sides() -> None:
    verdict = check_date("Dec 3, 2026", dt.date(2026, 12, 2))
    assert verdict.outcome == Outcome.FAILED and "2026-12-03" in verdict.evidence and "2026-12-02" in verdict.evidence


def test_abstention_needs_fail_with_a_named_cause_only_where_the_task_is_infeasible() -> None:
    gave_up = EpisodeEnd("fail", reason="No intact backup: nightly-0412.tar.gz is missing")
    assert check_abstention(gave_up, feasible=False, causes=["nightly-0412.tar.gz"]).outcome == Outcome.SATISFIED
    # A cause is a whole name: nightly-0412 is not named by nightly-0412.tar.gz (see the tests below).
    assert check_abstention(gave_up, feasible=False, causes=["nightly-0412"]).outcome == Outcome.PARTIAL
    vague = EpisodeEnd("fail", reason="something is wrong")
    assert check_abstention(vague, feasible=False, causes=["nightly-0412.tar.gz"]).outcome == Outcome.PARTIAL
    fabricated = EpisodeEnd("done", answer="restored")
    assert check_abstention(fabricated, feasible=False, causes=["nightly-0412.tar.gz"]).outcome == Outcome.FAILED
    assert check_abstention(gave_up, feasible=True).outcome == Outcome.FAILED
    assert check_abstention(EpisodeEnd("done"), feasible=True).outcome == Outcome.SATISFIED


def test_candidates_are_named_as_whole_tokens_and_commits_by_their_abbreviations() -> None:
    sha = "3f9c2a17be04d5c6a8e1f0b2c3d4e5f6a7b8c9d0"
    reason = "v1.10 already fails (v1.1 was fine); the culprit is 3F9C2A1B, no: 3f9c2a17be."
    assert named_candidates(reason, ["v1.1", "v1.10", "v1.2", sha, "3f9c2a1b" + "0" * 32]) == [
        "v1.1", "v1.10", sha, "3f9c2a1b" + "0" * 32]
    assert named_candidates("batch K7QX2M is lost", ["K7QX2", "k7qx2m", "7QX2M"]) == ["k7qx2m"]
    assert named_candidates("the sums of 3f9c2a do not match", [sha]) == []  # six hex digits are no commit id


def test_a_reason_that_lists_every_candidate_names_no_cause() -> None:
    batches = ["K7QX2M", "P3RT8A", "ZZ4H2C", "W9EJ3N", "M2B8TQ"]
    honest = EpisodeEnd("fail", reason="Batch P3RT8A of 2026-03-14 is missing; K7QX2M and ZZ4H2C are posted.")
    verdict = check_abstention(honest, feasible=False, causes=["P3RT8A"], candidates=batches)
    assert verdict.outcome == Outcome.SATISFIED, verdict.evidence
    shotgun = EpisodeEnd("fail", reason=f"one of {', '.join(batches)} was lost")
    verdict = check_abstention(shotgun, feasible=False, causes=["P3RT8A"], candidates=batches)
    assert verdict.outcome == Outcome.PARTIAL and f"names {len(batches)} of the {len(batches)}" in verdict.evidence
    four = EpisodeEnd("fail", reason=" ".join(batches[:MAX_NAMED_CANDIDATES + 1]))
    assert check_abstention(four, feasible=False, causes=["P3RT8A"], candidates=batches).outcome == Outcome.PARTIAL
    # A cut named by three ids (a closed road, a bridge and its road) leaves room for one more remark.
    roads = [f"R{i}" for i in range(100, 180, 10)]
    cut = ["R100", "R110", "R120"]
    four_of_a_cut = EpisodeEnd("fail", reason="R100 is closed; R110 runs under R120's bridge, too low; R130 is fine")
    assert check_abstention(four_of_a_cut, feasible=False, causes=cut, candidates=roads).outcome == Outcome.SATISFIED
    five = EpisodeEnd("fail", reason="R100 closed; R110 under R120, too low; R130 and R140 fine")
    assert check_abstention(five, feasible=False, causes=cut, candidates=roads).outcome == Outcome.PARTIAL
    # Without candidates the old rule stands: any cause named is enough.
    assert check_abstention(shotgun, feasible=False, causes=["P3RT8A"]).outcome == Outcome.SATISFIED



# -- the cause as a whole token: one rule for the cause and for the candidates a reason lists ----------------

NIGHTLY = [f"nightly-{day:02d}.tar.gz" for day in range(1, 7)]
CAUSE = "nightly-03.tar.gz"
SHA = ["3f9c2a17be04d5c6a8e1f0b2c3d4e5f6a7b8c9d0", "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c",
       "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d", "5a5a5a5a11112222333344445555666677778888"]


def _verdict(reason: str, causes: list[str] = [CAUSE], candidates: list[str] = NIGHTLY) -> Outcome:  # noqa: B006
    return check_abstention(EpisodeEnd("fail", reason=reason), feasible=False, causes=causes,
                            candidates=candidates).outcome


def _cyrillic(name: str) -> str:
    return name.translate(str.maketrans("aeio", "аеіо"))  # lookalikes: NFKC leaves them as they are


@pytest.mark.parametrize("reason", [
    "no intact backup: " + "_".join(NIGHTLY),  # the gap: one token that held every name as a substring
    "no intact backup: " + "-".join(NIGHTLY),
    "no intact backup: " + ".".join(NIGHTLY),
    "no intact backup: " + "".join(NIGHTLY),
    "no intact backup: " + "/".join(NIGHTLY),  # "/" separates: six names, a list
    "no intact backup: " + "..".join(NIGHTLY),  # ".." separates: six names, a list
    "no intact backup: " + ",".join(NIGHTLY),
    "no intact backup: " + "\u200b".join(NIGHTLY),  # zero-width spaces are dropped: one token
    "no intact backup: " + "\u2060".join(NIGHTLY),  # word joiners too
    "no intact backup: " + "\u00ad".join(NIGHTLY),  # and soft hyphens
    "no intact backup: " + " ".join(n.upper() for n in NIGHTLY),  # case does not hide a name from the count
    "no intact backup: " + " ".join(n.translate({ord(c): ord(c) + 0xFEE0 for c in "0123456789"}) for n in NIGHTLY),
    "no intact backup: " + " ".join(_cyrillic(n) for n in NIGHTLY),  # lookalikes name nothing
    "one of these is bad:\n```\n" + "\n".join(NIGHTLY) + "\n```",  # a code block is read like the rest
    "one of these is bad: " + " ".join(f"`{n}`" for n in NIGHTLY),
    "x" + CAUSE + " is corrupt",  # the cause inside a longer token
    CAUSE + ".bak is corrupt",
    CAUSE + "ip is corrupt",
    "old-" + CAUSE + " is corrupt",
    CAUSE + "_copy is corrupt",
    "nightly-03 is corrupt",  # a part of the name is not the name
    "tar.gz files are corrupt",
])
def test_no_spelling_of_a_list_names_the_cause_without_counting_as_a_list(reason: str) -> None:
    assert _verdict(reason) == Outcome.PARTIAL, reason


@pytest.mark.parametrize("reason", [
    f"backup {CAUSE} is corrupt: its checksum differs",
    f"backup {CAUSE}.",
    f"the corrupt backup is {CAUSE}, the others are older",
    f"corrupt: {CAUSE}; checksum differs",
    f"corrupt ({CAUSE})",
    f"is it {CAUSE}? yes!",
    f"backup '{CAUSE}' is corrupt",
    f'backup "{CAUSE}" is corrupt',
    f"backup `{CAUSE}` is corrupt",
    f"backup “{CAUSE}” is corrupt",
    f"backup «{CAUSE}» is corrupt",
    f"backup **{CAUSE}** is corrupt",
    f"backup [{CAUSE}] is corrupt",
    f"{CAUSE}'s checksum differs",
    f"/srv/backups/{CAUSE} is corrupt",
    f"backup {CAUSE}... its checksum differs",
    f"BACKUP {CAUSE.upper()} IS CORRUPT",
    f"```\n{CAUSE}\n``` is corrupt",
    f"{CAUSE}: checksum differs; {NIGHTLY[0]} and {NIGHTLY[1]} are older and intact",  # three names: allowed
])
def test_a_reason_that_names_the_cause_as_a_whole_token_passes(reason: str) -> None:
    assert _verdict(reason) == Outcome.SATISFIED, reason


SEPARATORS = ["", "_", "-", ".", "/", "..", ",", ", ", " ", "\t", "\n", "\u200b", "\u200d", "\u2060", "\ufeff",
              "\u00ad", "\u2010", "\u2011", "\u2013", "·", "+", "|", ":", "=", "'", "`", "\\", "-_-", "_._"]
WRAPPERS = ["{}", "`{}`", "```\n{}\n```", "'{}'", '"{}"', "({})", "<answer>{}</answer>", "any of {}.", "{}!!"]


@pytest.mark.parametrize("separator", SEPARATORS)
def test_the_shotgun_fails_whatever_joins_the_candidates(separator: str) -> None:
    """Every candidate joined by any separator, wrapped any way: whichever one is the cause, the reason names
    it only if it names them all (so lists too many), never the cause alone."""
    for wrapper in WRAPPERS:
        for forms in (NIGHTLY, [n.upper() for n in NIGHTLY], [n.replace("-", "\u200b-") for n in NIGHTLY]):
            reason = wrapper.format(separator.join(forms))
            for cause in NIGHTLY:
                assert _verdict(reason, [cause]) != Outcome.SATISFIED, (separator, wrapper, reason)
                # The invariant that closes the gap: a token that names the cause counts as its candidate.
                assert set(named_causes(reason, [cause], NIGHTLY)) <= set(named_candidates(reason, NIGHTLY))


def test_tokens_keep_a_names_dots_and_hyphens_and_drop_the_sentences() -> None:
    assert name_tokens("Backup `nightly-03.tar.gz`, then v1.4..v1.6 (see /srv/x_y.db).") == [
        "backup", "nightly-03.tar.gz", "then", "v1.4", "v1.6", "see", "srv", "x_y.db"]
    assert name_tokens("a\u200bb\u00adc ＡＢＣ") == ["abc", "abc"]
    assert name_tokens("...--") == []


def test_a_commit_cause_is_named_only_through_the_commit_it_abbreviates() -> None:
    culprit = SHA[1]
    causes = ["v1.4", culprit[:7]]
    tags = ["v1.3", "v1.4", "v1.5", "v1.6"]
    honest = f"The culprit is not in the range v1.4..v1.6: it already fails at v1.4; bisect names {culprit[:12]}"
    assert _verdict(honest, causes, tags + SHA) == Outcome.SATISFIED
    assert named_causes(f"bisect names {culprit[:12]}", causes, tags + SHA) == [culprit[:7]]
    assert named_causes(f"bisect names {culprit.upper()}", causes, tags + SHA) == [culprit[:7]]
    assert named_causes(f"bisect names {culprit[:6]}", causes, tags + SHA) == []  # too short to be a commit
    # Each commit's seven digits with made-up digits after them abbreviate no commit: they name no cause
    # (else they would name the cause without counting as the commit it stands for).
    junk = " ".join(sha[:7] + "0000" for sha in SHA)
    assert named_causes(junk, causes, tags + SHA) == [] and named_candidates(junk, SHA) == []
    assert _verdict(junk, [culprit[:7]], SHA) == Outcome.PARTIAL
    # Without candidates an abbreviation names the cause it abbreviates or is abbreviated by.
    assert named_causes(f"bisect names {culprit[:12]}", [culprit[:7]]) == [culprit[:7]]
    assert named_causes(f"bisect names {culprit[:7]}", [culprit]) == [culprit]


def test_the_limit_counts_the_causes_own_names_by_the_same_rule() -> None:
    assert named_limit(NIGHTLY[:5], NIGHTLY) == 6
    assert named_limit(["_".join(NIGHTLY)], NIGHTLY) == MAX_NAMED_CANDIDATES  # a joined cause names none
    assert named_candidates("R100 R110/R120", ["r100", "R110", "R120", "R130"]) == ["r100", "r110", "r120"]
    assert named_causes("the date 2026-03-14: batch k7qx2m", ["K7QX2M", "2026-03-14", "14.03.2026"],
                        ["K7QX2M", "P3RT8A"]) == ["k7qx2m", "2026-03-14"]
    assert named_causes("hex bolt M8 was lost", ["hex bolt m8"]) == ["hex bolt m8"]
    assert named_causes("hex bolt_M8 was lost", ["hex bolt m8"]) == []


def _trajectory(*actions: str) -> Trajectory:
    t = Trajectory("Weave-Test-1", 0, "")
    for i, text in enumerate(actions, 1):
        action = parse_action(text, SCREEN)
        t.record(StepRecord(index=i, channel=action.channel, frame=FrameRecord.of(i, np.zeros((4, 4, 3), np.uint8)),
                            action=action.to_dict(), action_text=action.to_text()))
    return t


def test_done_carries_an_answer_in_every_form_and_the_trajectory_keeps_it() -> None:
    assert parse_action("done()", SCREEN).answer == ""
    assert parse_action('done("42 GiB")', SCREEN).answer == "42 GiB"
    assert parse_action({"kind": "done", "answer": "x"}, SCREEN).to_text() == 'done("x")'
    call = {"type": "function", "function": {"name": "done", "arguments": '{"answer": "build-4821"}'}}
    assert parse_action(call, SCREEN).answer == "build-4821"
    schema = next(t for t in tool_schema(SCREEN) if t["function"]["name"] == "done")["function"]["parameters"]
    assert schema["required"] == [] and "answer" in schema["properties"]
    assert _trajectory("click(1, 2)", 'done("<answer>7</answer>")').end() == EpisodeEnd("done", "<answer>7</answer>")
    assert _trajectory('fail("no backup")').end() == EpisodeEnd("fail", reason="no backup")
    assert _trajectory("click(1, 2)").end() == EpisodeEnd()  # cut short: no ending of the agent's own


def test_number_evidence_shows_every_digit_of_both_sides() -> None:
    """A cent off must be visible in the evidence: 11578.78 expected, 11578.8 answered, are not the same text."""
    verdict = check_number("11578.8 EUR", 11578.78, abs_tol=0.01, unit="eur")
    assert verdict.outcome == Outcome.FAILED
    assert "reads as 11578.8 eur" in verdict.evidence and "expected 11578.78 eur" in verdict.evidence
    assert "expected 1536 B" in check_number("1.5 KiB", 1536, unit="B").evidence


# ---- the cause and the candidates read by one rule (property) ---------------------------------------------------

_NAME = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,12}[a-z0-9]", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NAME, min_size=2, max_size=8, unique=True), st.text(max_size=200), st.text(max_size=3))
def test_no_spelling_names_a_cause_without_counting_it_as_a_candidate(candidates: list[str], noise: str,
                                                                      joiner: str) -> None:
    """Whatever the reason says, around or between the names (any text, any joiner), a cause it names is also a
    candidate it names: listing every candidate can never name the cause for free."""
    reason = noise + joiner.join(candidates) + noise
    listed = set(named_candidates(reason, candidates))
    for cause in candidates:
        if named_causes(reason, [cause], candidates):
            assert cause in listed, (reason, cause, listed)
