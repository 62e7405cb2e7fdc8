# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A model directory against the hub's listing: the listing from the hub's answers, and each file's verdict.

The hub answers here are in the shape of huggingface.co's /api/models/REPO/revision/REV and /tree/REV
(molecule/resources/hf_hub/hf_hub_standin.py serves the same shape to the real hf CLI in the model scenario).
"""

from __future__ import annotations

import hashlib

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.model_files import (
    ListingError,
    check_directory,
    check_listing,
    file_digest,
    listing_from_hub,
    mismatch_problem,
    next_link,
    weights_sglang_loads,
)

COMMIT = "cc55509a06268dddf8ad1a5fb5a202a9508c96f8"
CONFIG = b'{"architectures": ["GlmMoeDsaForCausalLM"]}\n'
WEIGHTS = bytes(range(256)) * 4096


def _git_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _tree():
    return [
        {"type": "directory", "path": "sub", "oid": "0" * 40, "size": 0},
        {"type": "file", "path": "config.json", "size": len(CONFIG), "oid": _git_oid(CONFIG)},
        {"type": "file", "path": "model-00001-of-00001.safetensors", "size": 134, "oid": "1" * 40,
         "lfs": {"oid": hashlib.sha256(WEIGHTS).hexdigest(), "size": len(WEIGHTS), "pointerSize": 134}},
    ]


def _listing():
    return listing_from_hub("standin/GLM-5-NVFP4-tiny", {"sha": COMMIT, "siblings": []}, [_tree()])


def _model(directory, config=CONFIG, weights=WEIGHTS):
    directory.mkdir(exist_ok=True)
    if config is not None:
        (directory / "config.json").write_bytes(config)
    if weights is not None:
        (directory / "model-00001-of-00001.safetensors").write_bytes(weights)
    return directory


def test_the_listing_takes_lfs_sizes_and_sha256_and_the_git_blob_id_of_the_rest():
    listing = _listing()
    assert listing["commit"] == COMMIT
    assert [f["path"] for f in listing["files"]] == ["config.json", "model-00001-of-00001.safetensors"]
    weights = listing["files"][1]
    assert weights["size"] == len(WEIGHTS) and weights["sha256"] == hashlib.sha256(WEIGHTS).hexdigest()
    assert "sha256" not in listing["files"][0]
    assert listing["total_bytes"] == len(CONFIG) + len(WEIGHTS)


def test_listings_over_pages_are_one_listing():
    tree = _tree()
    listing = listing_from_hub("r/m", {"sha": COMMIT}, [tree[:2], tree[2:]])
    assert len(listing["files"]) == 2


@pytest.mark.parametrize("info, pages, words", [
    ({"sha": "main"}, [[]], "names no commit"),
    ([], [[]], "names no commit"),
    ({"sha": COMMIT}, [[]], "lists no files"),
    ({"sha": COMMIT}, [{"error": "nope"}], "not a list of files"),
])
def test_hub_answers_that_are_no_listing_are_refused(info, pages, words):
    with pytest.raises(ListingError, match=words):
        listing_from_hub("r/m", info, pages)


def test_the_next_page_comes_from_the_link_header():
    header = '<https://huggingface.co/api/models/r/m/tree/abc?cursor=xyz>; rel="next"'
    assert next_link(header) == "https://huggingface.co/api/models/r/m/tree/abc?cursor=xyz"
    assert next_link('<https://h/a>; rel="prev", <https://h/b>; rel="next"') == "https://h/b"
    assert next_link(None) is None and next_link('<https://h/a>; rel="prev"') is None


@pytest.mark.parametrize("listing, words", [
    ({}, "no list of files"),
    ({"files": []}, "no list of files"),
    ({"files": [{"path": "a"}]}, "no path or size"),
    ({"files": [{"path": "a", "size": 1}]}, "a has no hash"),
    ({"files": [{"path": "../etc/passwd", "size": 1, "git_oid": "x"}]}, "leaves the model directory"),
    ({"files": [{"path": "/etc/passwd", "size": 1, "git_oid": "x"}]}, "leaves the model directory"),
])
def test_a_manifest_that_is_no_listing_is_refused(listing, words):
    with pytest.raises(ListingError, match=words):
        check_listing(listing)


def test_the_git_blob_id_is_gits_own(tmp_path):
    # git hash-object of a file holding "hello\n".
    (tmp_path / "f").write_bytes(b"hello\n")
    assert file_digest(str(tmp_path / "f"), {"git_oid": "x"}) == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_a_complete_copy_is_verified(tmp_path):
    result = check_directory(str(_model(tmp_path / "m")), _listing(), workers=2)
    assert result["complete"] and result["verified"] == ["config.json", "model-00001-of-00001.safetensors"]
    assert result["present_bytes"] == len(CONFIG) + len(WEIGHTS)
    assert mismatch_problem("m", _listing(), result, "gpu-1") is None


def test_a_changed_byte_of_the_same_size_is_caught_with_both_hashes(tmp_path):
    changed = bytearray(WEIGHTS)
    changed[len(changed) // 2] ^= 0xFF
    result = check_directory(str(_model(tmp_path / "m", weights=bytes(changed))), _listing())
    assert not result["complete"] and result["verified"] == ["config.json"]
    [mismatch] = result["mismatched"]
    assert mismatch == {"path": "model-00001-of-00001.safetensors", "kind": "sha256",
                        "expected": hashlib.sha256(WEIGHTS).hexdigest(),
                        "actual": hashlib.sha256(bytes(changed)).hexdigest()}
    problem = mismatch_problem("/m", _listing(), result, "gpu-1")
    assert problem.startswith("/m (standin/GLM-5-NVFP4-tiny at cc55509a0626) on gpu-1: 1 of 2 files differ")
    assert "model-00001-of-00001.safetensors: sha256 %s expected, %s on disk" % (
        mismatch["expected"], mismatch["actual"]) in problem


def test_a_short_file_and_a_missing_one(tmp_path):
    result = check_directory(str(_model(tmp_path / "m", config=None, weights=WEIGHTS[:-1])), _listing())
    assert result["missing"] == [{"path": "config.json", "size": len(CONFIG)}]
    assert result["mismatched"] == [{"path": "model-00001-of-00001.safetensors", "kind": "size",
                                     "expected": len(WEIGHTS), "actual": len(WEIGHTS) - 1}]
    assert result["present_bytes"] == len(WEIGHTS) - 1


def test_a_changed_small_file_is_caught_by_its_git_blob_id(tmp_path):
    result = check_directory(str(_model(tmp_path / "m", config=CONFIG.replace(b"G", b"X"))), _listing())
    assert [(m["path"], m["kind"]) for m in result["mismatched"]] == [("config.json", "git blob id")]


def test_a_directory_not_there_holds_none_of_the_files(tmp_path):
    result = check_directory(str(tmp_path / "absent"), _listing())
    assert [m["path"] for m in result["missing"]] == ["config.json", "model-00001-of-00001.safetensors"]
    assert result["present_bytes"] == 0 and not result["complete"]


def test_files_the_listing_does_not_name_are_left_alone(tmp_path):
    model = _model(tmp_path / "m")
    (model / ".cache").mkdir()
    (model / ".cache" / "x.metadata").write_text("etag")
    (model / ".sm120-model.json").write_text("{}")
    assert check_directory(str(model), _listing())["complete"]


def _entry(**changes):
    entry = {"path": "model-00001-of-00001.safetensors", "size": len(WEIGHTS), "git_oid": "1" * 40,
             "sha256": hashlib.sha256(WEIGHTS).hexdigest()}
    entry.update(changes)
    return {"repo": "r/m", "commit": COMMIT, "files": [entry]}


@pytest.mark.parametrize("changes, words", [
    ({"size": str(len(WEIGHTS))}, r"size '1048576', not a whole number of bytes: write it as an integer"),
    ({"size": True}, "size True, not a whole number"),
    ({"size": -1}, "size -1, not a whole number"),
    ({"size": 1.5}, "size 1.5, not a whole number"),
    ({"sha256": "sha256:" + hashlib.sha256(WEIGHTS).hexdigest()},
     "sha256 'sha256:.*', not 64 lowercase hex digits: write the digest alone without the algorithm's prefix"),
    ({"sha256": hashlib.sha256(WEIGHTS).hexdigest().upper()}, "sha256 '[0-9A-F]{64}', not 64 lowercase hex digits"),
    ({"sha256": "abc"}, "sha256 'abc', not 64"),
    ({"git_oid": "1" * 39}, "git_oid '1{39}', not 40 lowercase hex digits"),
    ({"git_oid": 12}, "git_oid 12, not 40"),
    ({"path": ""}, "no path or size"),
])
def test_a_listing_entry_of_another_form_is_refused_naming_it(changes, words):
    with pytest.raises(ListingError, match="model-00001-of-00001.safetensors has " + words
                       if "path" not in changes else words) as caught:
        check_listing(_entry(**changes))
    assert "Nothing was checked or removed" in str(caught.value)


def test_a_path_listed_twice_is_refused():
    listing = _entry()
    listing["files"].append(dict(listing["files"][0]))
    with pytest.raises(ListingError, match="model-00001-of-00001.safetensors is listed twice"):
        check_listing(listing)


def test_a_valid_listing_is_taken_as_it_is():
    listing = _entry()
    assert check_listing(listing) is listing


def test_a_hub_answer_of_another_form_is_refused_too():
    tree = _tree()
    tree[2]["lfs"]["oid"] = "sha256:" + tree[2]["lfs"]["oid"]
    with pytest.raises(ListingError, match="without the algorithm's prefix"):
        listing_from_hub("r/m", {"sha": COMMIT}, [tree])


@pytest.mark.parametrize("names, index, loaded", [
    # The loader's first pattern that matches wins; hidden files are not globbed.
    (["config.json", "a.safetensors", "b.bin", ".x.safetensors"], None, ["a.safetensors"]),
    (["pytorch_model.bin", "training_args.bin", "optimizer.pt"], None, ["pytorch_model.bin"]),
    (["model.pt", "optimizer.pt", "scaler.pt"], None, ["model.pt"]),
    (["config.json", "tokenizer.json"], None, []),
    # With an index, only the shards its weight_map names.
    (["m-1.safetensors", "m-2.safetensors", "model.safetensors"], {"m-1.safetensors", "m-2.safetensors"},
     ["m-1.safetensors", "m-2.safetensors"]),
    # An mtp.safetensors the index leaves out is added (GLM-4 MoE checkpoints; maybe_add_mtp_safetensors).
    (["m-1.safetensors", "mtp.safetensors"], {"m-1.safetensors"}, ["m-1.safetensors", "mtp.safetensors"]),
    # Without one, Mistral's pair is read as model.safetensors alone; any other set in full.
    (["consolidated.safetensors", "model.safetensors"], None, ["model.safetensors"]),
    (["model.safetensors", "old-00001-of-00002.safetensors"], None,
     ["model.safetensors", "old-00001-of-00002.safetensors"]),
])
def test_the_weights_sglang_loads_follow_its_loader(names, index, loaded):
    assert weights_sglang_loads(names, index) == loaded


def test_a_shard_and_its_index_left_from_another_revision_make_the_directory_incomplete(tmp_path):
    # Every listed file is there and verified; the other revision's index picks its own shard, which SGLang would
    # load in place of the listed weights.
    model = _model(tmp_path / "m")
    (model / "model-00001-of-00002.safetensors").write_bytes(b"old shard")
    (model / "model.safetensors.index.json").write_text(
        '{"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}}')
    result = check_directory(str(model), _listing())
    assert result["verified"] == ["config.json", "model-00001-of-00001.safetensors"]
    assert result["unlisted_weights"] == ["model-00001-of-00002.safetensors", "model.safetensors.index.json"]
    assert not result["complete"]
    problem = mismatch_problem("/m", _listing(), result, "gpu-1")
    assert problem == (
        "/m (standin/GLM-5-NVFP4-tiny at cc55509a0626) on gpu-1 holds 2 file(s) the listing does not name that "
        "SGLang's loader would read in place of the listed weights: model-00001-of-00002.safetensors, "
        "model.safetensors.index.json. They are left from another revision or copy: remove them (nothing was "
        "removed), or give the model an empty directory.")
    assert (model / "model-00001-of-00002.safetensors").exists()


def test_an_unlisted_shard_without_an_index_is_loaded_too(tmp_path):
    model = _model(tmp_path / "m")
    (model / "extra.safetensors").write_bytes(b"x")
    assert check_directory(str(model), _listing())["unlisted_weights"] == ["extra.safetensors"]


def test_unlisted_files_sglang_does_not_load_leave_it_complete(tmp_path):
    model = _model(tmp_path / "m")
    (model / "README.md").write_text("card")
    (model / "training_args.bin").write_bytes(b"x")
    (model / "sub").mkdir()
    (model / "sub" / "y.safetensors").write_bytes(b"x")
    result = check_directory(str(model), _listing())
    assert result["unlisted_weights"] == [] and result["complete"]
