# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import (
    ABSENT,
    PRESENT,
    PatchError,
    check_edits,
    check_original,
    decode_source,
    edit_state,
    original_text,
    render,
    sha256_hex,
)

# The shape of SGLang 0.5.9's communicator.py around the fusion gate.
SOURCE = (
    "from sglang.srt.utils import (\n"
    "    is_sm90_supported,\n"
    "    is_sm100_supported,\n"
    ")\n"
    "\n"
    "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
    "\n"
    "def apply_flashinfer_allreduce_fusion(batch_size: int):\n"
    "    return (\n"
    "        (_is_sm90_supported or _is_sm100_supported)\n"
    "        and batch_size > 0\n"
    "    )\n"
)
IMPORT = {"id": "import", "old": "    is_sm100_supported,\n)\n",
          "new": "    is_sm100_supported,\n    is_sm120_supported,\n)\n"}
CACHE = {"id": "cache", "old": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
         "new": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
                "_is_sm120_supported = _is_cuda and is_sm120_supported()\n"}
WIDEN = {"id": "widen", "old": "(_is_sm90_supported or _is_sm100_supported)\n",
         "new": "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"}
EDITS = [IMPORT, CACHE, WIDEN]


def test_present_again_absent_again_gives_the_original_text():
    patched, outcome = render(SOURCE, EDITS, PRESENT)
    assert outcome == {"applied": ["import", "cache", "widen"], "reverted": [], "skipped": []}
    assert "or _is_sm120_supported)" in patched and "    is_sm120_supported,\n" in patched

    again, outcome = render(patched, EDITS, PRESENT)
    assert again == patched
    assert outcome["applied"] == [] and sorted(outcome["skipped"]) == ["cache", "import", "widen"]

    reverted, outcome = render(patched, EDITS, ABSENT)
    assert outcome["reverted"] == ["widen", "cache", "import"]
    assert reverted == SOURCE

    again, outcome = render(reverted, EDITS, ABSENT)
    assert again == SOURCE and outcome["reverted"] == []


def test_edit_state_of_an_insertion_counts_the_anchor_inside_new():
    assert edit_state(SOURCE, CACHE) == ABSENT
    assert edit_state(render(SOURCE, [CACHE])[0], CACHE) == PRESENT


def test_edit_state_when_new_is_inside_old():
    # A deletion: old contains new, so the pristine text contains new once already.
    narrow = {"id": "narrow", "old": "(_is_sm90_supported or _is_sm100_supported)",
              "new": "(_is_sm90_supported)"}
    source = "x = (_is_sm90_supported or _is_sm100_supported)\n"
    assert edit_state(source, narrow) == ABSENT
    shrunk, _outcome = render(source, [narrow])
    assert shrunk == "x = (_is_sm90_supported)\n"
    assert edit_state(shrunk, narrow) == PRESENT
    assert render(shrunk, [narrow], ABSENT)[0] == source


def test_old_missing_names_the_edit_the_file_and_the_counts():
    with pytest.raises(PatchError, match=r"edit 'widen' on comm\.py: its old text occurs 0 times and its new text 0"):
        render(SOURCE.replace("_is_sm100_supported)\n", "_is_sm100_supported )\n"), EDITS, PRESENT, "comm.py")


def test_old_ambiguous_fails_before_anything_is_returned():
    doubled = SOURCE + "        (_is_sm90_supported or _is_sm100_supported)\n"
    with pytest.raises(PatchError, match=r"'widen'.*old text occurs 2 times"):
        render(doubled, EDITS, PRESENT)


def test_new_present_twice_is_refused_on_revert():
    patched, _outcome = render(SOURCE, [WIDEN])
    with pytest.raises(PatchError, match="new text 2 times"):
        render(patched + WIDEN["new"], [WIDEN], ABSENT)


def test_an_edit_that_creates_a_second_occurrence_is_refused():
    # Replacing "a" by "aa" inside "a b": after the change "a" occurs twice, not via new.
    with pytest.raises(PatchError):
        render("a b a2", [{"id": "x", "old": "b", "new": "a"}])


def test_per_edit_state_turns_one_edit_off_and_another_on_in_one_pass():
    patched, _outcome = render(SOURCE, [IMPORT, CACHE])
    mixed = [dict(IMPORT, state=ABSENT), dict(CACHE, state=ABSENT), WIDEN]
    out, outcome = render(patched, mixed, PRESENT)
    assert outcome == {"applied": ["widen"], "reverted": ["cache", "import"], "skipped": []}
    assert out == render(SOURCE, [WIDEN])[0]


def test_original_text_and_check_original():
    sha = sha256_hex(SOURCE.encode())
    partly, _outcome = render(SOURCE, [IMPORT])
    assert original_text(partly, EDITS) == SOURCE
    check_original(partly, EDITS, sha.upper())
    foreign = partly.replace("batch_size > 0", "batch_size > 1")
    with pytest.raises(PatchError, match="edited by something else"):
        check_original(foreign, EDITS, sha, "comm.py")


def test_check_original_reports_an_undecidable_file():
    with pytest.raises(PatchError, match="refusing to touch it"):
        check_original("nothing here\n", EDITS, "0" * 64)


@pytest.mark.parametrize("edits, message", [
    ([{"id": "", "old": "a", "new": "b"}], "needs an id"),
    ([{"id": "a", "old": "x", "new": "y"}, {"id": "a", "old": "z", "new": "w"}], "used twice"),
    ([{"id": "a", "old": "", "new": "y"}], "empty old"),
    ([{"id": "a", "old": "x", "new": "x"}], "new equal to old"),
    ([{"id": "a", "old": "x", "new": None}], "no new text"),
    ([{"id": "a", "old": "x", "new": "y", "state": "gone"}], "state 'gone'"),
])
def test_check_edits_refuses_undecidable_edit_lists(edits, message):
    with pytest.raises(PatchError, match=message):
        check_edits(edits)


def test_decode_source_refuses_non_utf8():
    assert decode_source("é\n".encode(), "f.py") == "é\n"
    with pytest.raises(PatchError, match=r"f\.py is not UTF-8"):
        decode_source(b"\xff\xfe", "f.py")


def test_line_endings_and_trailing_bytes_survive_a_round_trip():
    crlf = SOURCE.replace("\n", "\r\n")
    edits = [{k: (v.replace("\n", "\r\n") if k != "id" else v) for k, v in e.items()} for e in EDITS]
    patched, _outcome = render(crlf, edits)
    assert render(patched, edits, ABSENT)[0] == crlf
