# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_release
short_description: The install set of an SGLang release, from the collection's release data
version_added: "0.2.0"
description:
  - Reads C(data/sglang_releases.yml), the one place the collection describes SGLang releases, and returns the install
    set of each release asked for - the exact pins of its wheel's C(Requires-Dist), the CUDA release of its torch, the
    oldest NVIDIA driver branch that CUDA release runs on, its C(Requires-Python), and whether it serves GLM-5.
  - V(newest) asks for the newest release that serves GLM-5, the collection's default.
  - Without terms it returns every release the data describes, oldest first.
options:
  _terms:
    description: SGLang release numbers, or V(newest).
    type: list
    elements: str
    required: false
"""

EXAMPLES = r"""
- name: Show the default install set
  ansible.builtin.debug:
    msg: "{{ lookup('sm120.sglang.sglang_release', 'newest') }}"

- name: Refuse a driver too old for the release
  ansible.builtin.assert:
    that: gpu_driver_branch | int >= lookup('sm120.sglang.sglang_release', '0.5.23').min_driver_branch
"""

RETURN = r"""
_raw:
  description:
    - Per term, the install set - C(version), C(date), C(glm5), C(requires_python), C(torch_cuda),
      C(min_driver_branch), C(sm120_min_driver_branch) (the oldest branch that drives SM120 GPUs at all, whatever
      the release), C(packages) (each C(name), C(version), C(extras), C(requirement)), C(versions) (name to
      version) and C(requirements) (the pip requirement strings). Without terms, the release numbers.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            data = sglang_releases.load()
            if not terms:
                return sglang_releases.versions(data)
            return [sglang_releases.install_set(data, term) for term in terms]
        except sglang_releases.ReleaseDataError as exc:
            raise AnsibleLookupError(str(exc))
