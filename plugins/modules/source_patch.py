#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: source_patch
short_description: Apply or revert content-anchored edits of one source file
version_added: "0.1.0"
description:
  - Edits one text file by content, never by line number, so the same edit keeps working while the lines around it move
    between releases.
  - Each edit replaces an exact snippet O(edits[].old) that must occur exactly once with O(edits[].new). An insertion is
    an edit whose O(edits[].new) starts with its O(edits[].old).
  - Whether an edit is in place is decided the way M(ansible.posix.patch) does it, by whether its reverse would succeed.
    With O(state=absent) the same edits run backwards, so applying and then reverting gives back the original bytes.
  - All edits of one call are applied together or not at all. The new content is written to a temporary file, checked
    with O(validate), given the file's current owner, group, mode and SELinux context and then the requested O(owner),
    O(group), O(mode) and SELinux fields, and only then moved onto O(path) atomically. An invalid O(mode), an unknown
    O(owner) or O(group), or a failing O(validate) therefore leaves the file untouched, bytes and attributes alike.
  - When no edit changes the content, the requested file attributes are checked first and then set on O(path).
  - Concurrent runs on one host take a lock per file, so their edits of one file never interleave; a run waits at most
    O(lock_timeout) for it.
options:
  path:
    description:
      - The file to edit. It must exist and be UTF-8 text.
      - When it is a symlink, the file it points to is edited and gets the file attributes.
    type: path
    required: true
    aliases: [dest]
  edits:
    description:
      - The edits, applied in order (reverted in reverse order).
    type: list
    elements: dict
    required: true
    suboptions:
      id:
        description:
          - A name for the edit, unique within this call; results and errors name edits by it.
        type: str
        required: true
      old:
        description:
          - The exact text the edit replaces. It must occur exactly once while the edit is not applied.
        type: str
        required: true
      new:
        description:
          - The exact text that replaces O(edits[].old). It must occur exactly once while the edit is applied.
        type: str
        required: true
      state:
        description:
          - Overrides O(state) for this edit, so one call can turn some edits on and others off atomically.
        type: str
        choices: [present, absent]
  state:
    description:
      - V(present) applies every edit that is not in place yet; V(absent) reverts every edit that is in place.
    type: str
    choices: [present, absent]
    default: present
  original_sha256:
    description:
      - The sha256 (hex) the file must have once every edit in O(edits) is reverted, for example the hash an installed
        wheel's C(RECORD) holds for it.
      - When set, a file that is not this original plus some of these edits is refused (someone else edited it), and
        after O(state=absent) the result must hash to it.
    type: str
  force:
    description:
      - Patch even when O(original_sha256) does not match.
    type: bool
    default: false
  validate:
    description:
      - A command that checks the new content before it replaces O(path); C(%s) stands for the temporary file,
        for example V(python3 -m py_compile %s).
      - The command runs as an argument list, not through a shell.
    type: str
  backup:
    description:
      - Keep a timestamped copy of the file as it was before this change.
    type: bool
    default: false
  lock_timeout:
    description:
      - How many seconds to wait for the per-file lock that another run of this module holds (in C(/run/lock), named
        in the error) before failing without changing anything. V(0) fails at once when the lock is held.
    type: int
    default: 300
    version_added: "0.2.0"
notes:
  - O(attributes) (C(chattr) flags) are checked before the move but set after it, because a temporary file that is
    immutable could not be moved into place.
extends_documentation_fragment:
  - ansible.builtin.files
  - sm120.sglang.attributes
attributes:
  check_mode:
    support: full
    description: Reports exactly what a real run would change, without writing.
  diff_mode:
    support: full
    description: Returns the file before and after.
seealso:
  - module: ansible.builtin.replace
  - module: ansible.builtin.lineinfile
  - module: ansible.posix.patch
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Let SM120 take the FlashInfer allreduce fusion path
  sm120.sglang.source_patch:
    path: /opt/sglang/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
    original_sha256: "{{ record_sha256 }}"
    validate: /opt/sglang/bin/python -m py_compile %s
    backup: true
    edits:
      - id: import_is_sm120_supported
        old: "    is_sm100_supported,\n)\n"
        new: "    is_sm100_supported,\n    is_sm120_supported,\n)\n"
      - id: widen_fusion_condition
        old: "(_is_sm90_supported or _is_sm100_supported)\n"
        new: "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"

- name: Revert the same edits, giving back the shipped bytes
  sm120.sglang.source_patch:
    path: /opt/sglang/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
    state: absent
    original_sha256: "{{ record_sha256 }}"
    edits: "{{ fusion_edits }}"
"""

RETURN = r"""
applied:
  description: Ids of the edits this run applied (or would apply, in check mode).
  returned: always
  type: list
  elements: str
  sample: [widen_fusion_condition]
reverted:
  description: Ids of the edits this run reverted (or would revert, in check mode).
  returned: always
  type: list
  elements: str
  sample: []
skipped:
  description: Ids of the edits already in the wanted state.
  returned: always
  type: list
  elements: str
  sample: [import_is_sm120_supported]
sha256_before:
  description: The sha256 of the file before this run.
  returned: always
  type: str
  sample: 3f0a9c1e8b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a
sha256_after:
  description: The sha256 of the file after this run (what it would be, in check mode).
  returned: always
  type: str
  sample: 9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d
backup_file:
  description: The copy made of the file before the change.
  returned: changed and O(backup=true)
  type: str
  sample: /opt/sglang/lib/python3.12/site-packages/sglang/srt/layers/communicator.py.2312.2026-11-29@12:00:00~
"""

import errno
import fcntl
import grp
import hashlib
import os
import pwd
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import (
    PatchError,
    attribute_drift,
    check_edits,
    check_file_args,
    check_original,
    decode_source,
    lock_timeout_message,
    merge_context,
    render,
    sha256_hex,
    validate_argv,
    validate_not_run_message,
    wait_for_lock,
)


def _lock_path(path):
    # One lock per real file, outside the package directory so nothing is left in it.
    key = hashlib.sha256(os.path.realpath(path).encode("utf-8")).hexdigest()[:24]
    base = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
    return os.path.join(base, "sm120-source-patch-%s.lock" % key)


def _read(module, path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read %s: %s" % (path, to_native(exc)))


def _validate(module, tmp_path, validate):
    try:
        argv = validate_argv(validate, tmp_path)
    except PatchError as exc:
        module.fail_json(msg=to_native(exc))
    try:
        rc, out, err = module.run_command(argv, handle_exceptions=False)
    except OSError as exc:
        # Without this, run_command's own handler says only "Error executing command."
        module.fail_json(msg=validate_not_run_message(validate, argv[0], exc.strerror or exc, module.params["path"]))
    if rc != 0:
        module.fail_json(
            msg="validate failed (rc %d) on the patched content; %s is unchanged: %s"
            % (rc, module.params["path"], (err or out).strip()),
            rc=rc, stdout=out, stderr=err,
        )


def _stage_attributes(module, tmp_path, real_path, file_args):
    """Give the temporary file the attributes the patched file must end with, while the original is untouched."""
    current = os.stat(real_path)
    try:
        os.chown(tmp_path, current.st_uid, current.st_gid)
    except OSError as exc:
        if exc.errno != errno.EPERM:  # not root: the file becomes ours, as with atomic_move's own copy
            module.fail_json(msg="cannot give the patched copy the owner of %s: %s; %s is unchanged"
                             % (real_path, to_native(exc), real_path))
    # After the chown, which clears set-id bits; copystat also carries ACLs and other xattrs.
    shutil.copystat(real_path, tmp_path)
    # The content is new: Python's bytecode cache compares the source mtime.
    os.utime(tmp_path, None)
    context = merge_context(module.selinux_context(real_path), file_args["secontext"])
    # chattr flags wait until after the move (see notes); the rest fails here, before anything is replaced.
    module.set_fs_attributes_if_different(dict(file_args, path=tmp_path, secontext=context, attributes=None), False)
    return os.stat(tmp_path), context


def _settle_attributes(module, real_path, staged, context, attributes):
    # keep_dest_attrs=False makes atomic_move reset the context to the policy default; put the staged one back.
    module.set_context_if_different(real_path, context, False)
    drift = attribute_drift(staged, os.stat(real_path))
    try:
        if "owner" in drift:
            os.chown(real_path, *drift["owner"])
        if "mode" in drift:
            os.chmod(real_path, drift["mode"])
    except OSError as exc:
        module.fail_json(msg="%s holds the patched content, but the move lost its attributes and they cannot be set "
                         "again (%s): set owner %d:%d and mode %04o by hand"
                         % (real_path, to_native(exc), staged.st_uid, staged.st_gid, staged.st_mode & 0o7777))
    module.set_attributes_if_different(real_path, attributes, True)


def _write(module, path, data, before_sha, file_args):
    real_path = os.path.realpath(path)
    fd, tmp_path = tempfile.mkstemp(prefix=".source_patch.", dir=module.tmpdir)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    if module.params["validate"]:
        _validate(module, tmp_path, module.params["validate"])
    staged, context = _stage_attributes(module, tmp_path, real_path, file_args)
    # The lock keeps other runs of this module out; this catches every other writer.
    if sha256_hex(_read(module, path)) != before_sha:
        module.fail_json(
            msg="%s changed while it was being patched (another process wrote it); nothing was written, run again"
            % path
        )
    backup_file = module.backup_local(path) if module.params["backup"] else None
    # keep_dest_attrs=False: the attributes were set on the temporary file and must survive the move.
    module.atomic_move(tmp_path, real_path, unsafe_writes=module.params["unsafe_writes"], keep_dest_attrs=False)
    _settle_attributes(module, real_path, staged, context, file_args["attributes"])
    return backup_file


def run(module):
    params = module.params
    path = params["path"]
    result = dict(changed=False, applied=[], reverted=[], skipped=[])
    try:
        check_edits(params["edits"])
    except PatchError as exc:
        module.fail_json(msg=to_native(exc), **result)
    if not os.path.isfile(path):
        module.fail_json(msg="%s does not exist or is not a regular file; source_patch edits existing files only" % path,
                         **result)
    if not os.access(path, os.W_OK) or not os.stat(path).st_mode & 0o222:
        module.fail_json(msg="%s is read-only (mode %04o); make it writable if it should be patched"
                         % (path, os.stat(path).st_mode & 0o7777), **result)
    file_args = module.load_file_common_arguments(params, path=os.path.realpath(path))
    current = os.stat(file_args["path"])

    before = _read(module, path)
    before_sha = sha256_hex(before)
    result["sha256_before"] = result["sha256_after"] = before_sha
    try:
        # Before anything is written, with AnsibleModule's own symbolic-mode parser: set_mode_if_different will agree.
        check_file_args(file_args, lambda text: AnsibleModule._symbolic_mode_to_octal(current, text),
                        lambda name: pwd.getpwnam(name).pw_uid, lambda name: grp.getgrnam(name).gr_gid, path)
        content = decode_source(before, path)
        if params["original_sha256"] and not params["force"]:
            check_original(content, params["edits"], params["original_sha256"], path)
        after_content, outcome = render(content, params["edits"], params["state"], path)
    except PatchError as exc:
        module.fail_json(msg=to_native(exc), **result)
    result.update(outcome)
    after = after_content.encode("utf-8")
    result["sha256_after"] = sha256_hex(after)
    if (params["state"] == "absent" and params["original_sha256"] and not params["force"]
            and result["sha256_after"] != params["original_sha256"].lower()):
        module.fail_json(msg="%s reverted does not hash to original_sha256; nothing was written" % path, **result)

    if after != before:
        result["changed"] = True
        if module._diff:
            result["diff"] = dict(before=content, after=after_content,
                                  before_header="%s (content)" % path, after_header="%s (content)" % path)
        if not module.check_mode:
            backup_file = _write(module, path, after, before_sha, file_args)
            if backup_file:
                result["backup_file"] = backup_file
    else:
        result["changed"] = module.set_fs_attributes_if_different(file_args, False)
    return result


def _take_lock(module, lock, lock_path):
    def try_lock():
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    timeout = module.params["lock_timeout"]
    try:
        locked = wait_for_lock(try_lock, timeout, time.monotonic, time.sleep)
    except PatchError as exc:
        module.fail_json(msg=to_native(exc))
    except OSError as exc:
        module.fail_json(msg="cannot lock %s: %s; nothing was changed" % (lock_path, to_native(exc)))
    if not locked:
        module.fail_json(msg=lock_timeout_message(lock_path, timeout, module.params["path"]))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True, aliases=["dest"]),
            edits=dict(type="list", elements="dict", required=True, options=dict(
                id=dict(type="str", required=True),
                old=dict(type="str", required=True, no_log=False),
                new=dict(type="str", required=True, no_log=False),
                state=dict(type="str", choices=["present", "absent"]),
            )),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            original_sha256=dict(type="str"),
            force=dict(type="bool", default=False),
            validate=dict(type="str"),
            backup=dict(type="bool", default=False),
            lock_timeout=dict(type="int", default=300),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    lock_path = _lock_path(module.params["path"])
    try:
        lock = open(lock_path, "a")
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot open the lock file %s: %s" % (lock_path, to_native(exc)))
    with lock:
        _take_lock(module, lock, lock_path)
        result = run(module)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
