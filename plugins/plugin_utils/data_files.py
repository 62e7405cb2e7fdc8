# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's data files (data/*.yml): read, checked and cached once per file version.

Runs on the controller; PyYAML comes with ansible-core. Each caller passes its own
check and error class, so a problem is reported in the terms of that data.
"""

from __future__ import annotations

import os

try:
    import yaml
except ImportError:  # ansible-core requires it; only a stripped-down controller lacks it
    yaml = None

_CACHE = {}


def read_checked(path, check, error, what):
    """``check(data)`` of the YAML at ``path``, read again only when the file changed; ``error`` on any problem."""
    if yaml is None:
        raise error("PyYAML is missing on the controller; install it (pip install pyyaml)")
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise error("cannot read the %s %s: %s" % (what, path, exc))
    cached = _CACHE.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    with open(path) as handle:
        try:
            data = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise error("%s is not valid YAML: %s" % (path, exc))
    data = check(data)
    _CACHE[path] = (stamp, data)
    return data


def version_range(text, where, error):
    """``text`` as a packaging SpecifierSet (">=0.5.16,<0.6"); ``error`` naming ``where`` when it is not one."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:  # ansible-core requires packaging; only a stripped-down controller lacks it
        raise error("packaging is missing on the controller; install it (pip install packaging)")
    try:
        return SpecifierSet(str(text))
    except InvalidSpecifier as exc:
        raise error("%s: %r is not a version range (%s)" % (where, text, exc))
