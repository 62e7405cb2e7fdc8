#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_files
short_description: Check a model directory against the Hugging Face Hub's hashes of its files
version_added: "0.9.0"
description:
  - Reads the listing of a model repository at a revision from the Hugging Face Hub (O(endpoint)) - its commit, and
    each file with its size, git blob id and, for LFS files, sha256 - or takes such a listing (O(listing)), as the
    manifest that travelled with the model from another host holds it.
  - With O(path), checks each listed file in that directory, hashing them in parallel, and says which are verified,
    missing, or differ in size or hash (with both values). C(hf download) checks sizes only, so a file changed in
    transit is caught here.
  - Refuses a listing whose entries are not of the hub's form (C(size) an integer, C(sha256) 64 lowercase hex digits,
    C(git_oid) 40), naming the entry, so that no valid file is called different on the strength of a value written
    another way.
  - A directory that holds files SGLang's loader would read but the listing does not name (a shard and its index
    left from another revision) is not complete; they are named in RV(unlisted_weights) and RV(problem).
  - It only reads and always returns C(changed=false).
options:
  repo:
    description: The repository, C(ORG/NAME). One of O(repo) and O(listing) is required.
    type: str
  revision:
    description: A branch, tag or commit of O(repo).
    type: str
    default: main
  endpoint:
    description: The hub, or a mirror of it (what C(HF_ENDPOINT) names for the CLI).
    type: str
    default: https://huggingface.co
  token_file:
    description: A file holding the token for gated or private repositories; it is sent as a bearer token.
    type: path
  listing:
    description: A listing as this module returns it (RV(listing)), used instead of asking the hub; the manifest
      that travels with the model (C(.sm120-model.json)) holds one.
    type: dict
  path:
    description: The directory to check against the listing; one that does not exist holds none of its files.
    type: path
  timeout:
    description: Seconds each request to the hub may take.
    type: int
    default: 60
extends_documentation_fragment:
  - sm120.sglang.attributes
  - sm120.sglang.attributes.read_only
seealso:
  - name: Hub API, repository tree
    description: The listing this module reads.
    link: https://huggingface.co/docs/hub/api
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: List the files of GLM-5-NVFP4 with their hashes
  sm120.sglang.model_files:
    repo: lukealonso/GLM-5-NVFP4
  register: listed

- name: Check a download against them
  sm120.sglang.model_files:
    listing: "{{ listed.listing }}"
    path: /var/lib/sglang/models/glm-5-nvfp4.partial
  register: checked
"""

RETURN = r"""
listing:
  description: The repository, its commit, each file (C(path), C(size), C(git_oid), and C(sha256) for LFS files)
    and their C(total_bytes).
  returned: always
  type: dict
  sample: {repo: lukealonso/GLM-5-NVFP4, commit: 0f3c..., total_bytes: 410123456789,
           files: [{path: config.json, size: 2101, git_oid: 9a1f...}]}
verified:
  description: The files of O(path) whose size and hash are the listing's.
  returned: when O(path) is given
  type: list
  elements: str
missing:
  description: Listed files that O(path) lacks, with their sizes.
  returned: when O(path) is given
  type: list
  elements: dict
mismatched:
  description: Files whose C(size), C(sha256) or C(git blob id) (C(kind)) differ, with the C(expected) and C(actual)
    values.
  returned: when O(path) is given
  type: list
  elements: dict
present_bytes:
  description: Bytes of the listed files already in O(path), verified or not.
  returned: when O(path) is given
  type: int
unlisted_weights:
  description: Files at the top of O(path) that SGLang's default loader (C(load_format) auto, as of 0.5.16) would read
    but the listing does not name, and the safetensors index that picks them where it is not listed.
  returned: when O(path) is given
  type: list
  elements: str
complete:
  description: Whether every listed file is there and verified, and no unlisted file would be loaded.
  returned: when O(path) is given
  type: bool
problem:
  description: The mismatched files with both values and the unlisted weights with the fix, for a message; null when
    there are none.
  returned: when O(path) is given
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.sm120.sglang.plugins.module_utils.model_files import (
    ListingError,
    check_directory,
    check_listing,
    commit_of,
    listing_from_hub,
    mismatch_problem,
    next_link,
)


def _get(module, url, headers):
    try:
        response = open_url(url, headers=headers, timeout=module.params["timeout"], follow_redirects="all")
        return json.loads(response.read()), response.headers.get("Link")
    except HTTPError as exc:
        hint = {401: "the repository is private or gated: set a token that may read it",
                403: "the token may not read it: accept the model's terms on the hub, or use another token",
                404: "no such repository or revision there: check the name, the revision and the endpoint"}
        module.fail_json(msg="%s answered %d for %s: %s." % (module.params["endpoint"], exc.code, url,
                                                             hint.get(exc.code, "try again later")))
    except (URLError, OSError, ValueError) as exc:
        module.fail_json(msg="Could not read %s: %s. Check that this host reaches %s (or set the endpoint to a "
                             "mirror it reaches)." % (url, to_native(exc), module.params["endpoint"]))
    return None, None


def _from_hub(module):
    params = module.params
    headers = {"Accept": "application/json"}
    if params["token_file"]:
        try:
            with open(params["token_file"]) as handle:
                headers["Authorization"] = "Bearer %s" % handle.read().strip()
        except (IOError, OSError) as exc:
            module.fail_json(msg="Could not read the token file %s: %s" % (params["token_file"], to_native(exc)))
    base = params["endpoint"].rstrip("/")
    repo = params["repo"]
    info, _link = _get(module, "%s/api/models/%s/revision/%s" % (base, repo, quote(params["revision"], safe="")),
                       headers)
    pages = []
    # At the commit, so that the listing is the one the download takes even if the branch moves meanwhile.
    url = "%s/api/models/%s/tree/%s?recursive=true" % (base, repo, commit_of(repo, info))
    while url:
        page, link = _get(module, url, headers)
        pages.append(page)
        url = next_link(link)
    return listing_from_hub(repo, info, pages)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo=dict(type="str"),
            revision=dict(type="str", default="main"),
            endpoint=dict(type="str", default="https://huggingface.co"),
            token_file=dict(type="path", no_log=False),
            listing=dict(type="dict"),
            path=dict(type="path"),
            timeout=dict(type="int", default=60),
        ),
        required_one_of=[("repo", "listing")],
        mutually_exclusive=[("repo", "listing")],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["listing"]:
            listing = check_listing(params["listing"])
        else:
            listing = _from_hub(module)
    except ListingError as exc:
        module.fail_json(msg=to_native(exc))
    result = {"changed": False, "listing": listing}
    if params["path"]:
        if os.path.exists(params["path"]) and not os.path.isdir(params["path"]):
            module.fail_json(msg="%s is not a directory: the model goes there. Move it away." % params["path"],
                             listing=listing)
        result.update(check_directory(params["path"], listing))
        result["problem"] = mismatch_problem(params["path"], listing, result, os.uname()[1])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
