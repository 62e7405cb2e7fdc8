# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module attributes the collection's modules share, written once.

A module extends ``sm120.sglang.attributes`` (every module: POSIX hosts), and ``sm120.sglang.attributes.read_only``
where it only reads, ``sm120.sglang.attributes.facts`` where it returns facts. A module's own ``attributes:`` entry
overrides the fragment's keys of that attribute (ansible-doc and validate-modules merge them so).
"""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """Attributes of every module of sm120.sglang."""

    DOCUMENTATION = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: posix
    description: Runs on POSIX hosts.
"""

    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: The module only reads, so check mode runs it in full.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
"""

    FACTS = r"""
options: {}
attributes:
  facts:
    support: full
    description: Returns its results as facts under RV(ansible_facts).
"""
