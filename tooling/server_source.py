# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names and literals across the modules of one SGLang release, read with ``ast``: server_flags.py's reader.

``_Release`` holds the release's sources (``read_source(path)``), ``ref`` follows a
name through imports and assignments to where it is bound, and ``_literal`` gives
the value of an expression the source spells out, or raises ``_Unresolved`` naming
what only the running release knows. Pure, stdlib only.
"""

from __future__ import annotations

import ast

_DEEP = 30


class _Unresolved(Exception):
    pass  # a value only the running release knows


class _Scope:
    """The names a block of statements binds (and the line of the condition, if any), and which it changes."""

    def __init__(self, body):
        self.names, self.changes = {}, {}
        self._read(body, None)

    def _read(self, body, condition):
        for node in body:
            if isinstance(node, (ast.If, ast.Try, ast.For, ast.While, ast.With)):
                blocks = [getattr(node, key, []) for key in ("body", "orelse", "finalbody")]
                for block in blocks + [handler.body for handler in getattr(node, "handlers", [])]:
                    self._read(block, condition or node.lineno)
            elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                self.names[node.name] = ("def", node, condition)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.names[alias.asname or alias.name] = ("from", (node.level, node.module, alias.name), condition)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.names[bound] = ("import", alias.name if alias.asname else bound, condition)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in getattr(node, "targets", [getattr(node, "target", None)]):
                    if isinstance(target, ast.Name):
                        self.names[target.id] = ("value", node.value, condition)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.changes.setdefault(node.target.id, node.lineno)
            elif isinstance(node, ast.Expr) and isinstance(getattr(node.value, "func", None), ast.Attribute) \
                    and isinstance(node.value.func.value, ast.Name):  # NAME.append(...), NAME.extend(...)
                self.changes.setdefault(node.value.func.value.id, node.lineno)


class _Module:
    def __init__(self, name, path, text):
        self.name, self.path, self.tree = name, path, ast.parse(text, path)
        self.package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        self.scope = _Scope(self.tree.body)


class _Release:
    """The release's modules, parsed when first needed; remembers every path it asked for."""

    def __init__(self, read_source):
        self._read, self._modules, self.looked_at = read_source, {}, []

    def module(self, name):
        base = name.replace(".", "/")
        for path in [] if name in self._modules else [base + ".py", base + "/__init__.py"]:
            self.looked_at.append(path)
            text = self._read(path)
            if text is not None:
                self._modules[name] = _Module(name, path, text)
                break
        return self._modules.setdefault(name, None)

    def lookup(self, module, name, scope=None, depth=0):
        """("value", module, node, scope, condition), ("def", ...), ("module", ...), ("external", name)."""
        where = scope if scope is not None and name in scope.names else module.scope
        if name not in where.names or depth > _DEEP:
            return ("external", "builtins." + name)
        kind, payload, condition = where.names[name]
        if kind == "def":
            return ("def", module, payload)
        if kind == "value":
            return ("value", module, payload, where, condition)
        if kind == "import":
            found = self.module(payload) if payload.startswith("sglang") else None
            return ("module", found) if found else ("external", payload)
        level, source, attr = payload
        if level:
            base = module.package.rsplit(".", level - 1)[0] if level > 1 else module.package
            source = base + "." + source if source else base
        found = self.module(source) if source and source.startswith("sglang") else None
        if found is not None and attr in found.scope.names:
            return self.lookup(found, attr, None, depth + 1)
        submodule = found and self.module(found.name + "." + attr)
        return ("module", submodule) if submodule else ("external", "%s.%s" % (source, attr))

    def ref(self, module, node, scope=None, depth=0):
        """What a Name or Attribute stands for, following plain aliases such as ``A = Annotated``."""
        found = ("opaque", node)
        if isinstance(node, ast.Name):
            found = self.lookup(module, node.id, scope)
        elif isinstance(node, ast.Attribute) and depth < _DEEP:
            base = self.ref(module, node.value, scope, depth + 1)
            if base[0] == "external":
                found = ("external", base[1] + "." + node.attr)
            elif base[0] == "module":
                found = self.lookup(base[1], node.attr)
            elif base[0] == "def" and isinstance(base[2], ast.ClassDef) and not base[2].bases:
                inner = _Scope(base[2].body)  # a plain class as a namespace, e.g. Backend.ALL
                found = self.lookup(base[1], node.attr, inner) if node.attr in inner.names else found
        if found[0] == "value" and isinstance(found[2], (ast.Name, ast.Attribute)) and depth < _DEEP:
            return self.ref(found[1], found[2], found[3] if found[3] is not found[1].scope else None, depth + 1)
        return found


def _qualname(found):
    """The dotted name a ref stands for ("typing.Literal", "sglang.srt.arg_groups.arg_utils.Arg"), else ""."""
    if found[0] == "def":
        return "%s.%s" % (found[1].name, found[2].name)
    return found[1] if found[0] == "external" else ""


def _literal(release, module, node, scope=None, depth=0):
    """The value of an expression the source spells out; _Unresolved names what it is otherwise."""
    def again(sub):
        return _literal(release, module, sub, scope, depth + 1)

    if depth > _DEEP:
        raise _Unresolved(ast.unparse(node))
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = []
        for item in node.elts:
            items.extend(again(item.value) if isinstance(item, ast.Starred) else [again(item)])
        return set(items) if isinstance(node, ast.Set) else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = again(node.left), again(node.right)
        return left + right if isinstance(left, str) else list(left) + list(right)
    convert = {"builtins.list": list, "builtins.tuple": list, "builtins.sorted": sorted, "builtins.set": set,
               "builtins.frozenset": set}
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        function = convert.get(_qualname(release.ref(module, node.func, scope)))
        if function is not None:
            return function(again(node.args[0]))
    found = release.ref(module, node, scope) if isinstance(node, (ast.Name, ast.Attribute)) else ("opaque",)
    if found[0] != "value":
        raise _Unresolved(ast.unparse(node))
    home, value_node, where, condition = found[1:]
    changed = where.changes.get(node.attr if isinstance(node, ast.Attribute) else node.id)
    if condition or changed:  # e.g. `if envs.X.get(): SAMPLING_BACKEND_CHOICES.add(...)`
        raise _Unresolved("%s, set or changed at %s:%s" % (ast.unparse(node), home.path, condition or changed))
    return _literal(release, home, value_node, where if where is not home.scope else None, depth + 1)


def _text(release, module, node, scope=None):
    try:
        value = _literal(release, module, node, scope)
    except _Unresolved:
        return ast.unparse(node)
    return value if isinstance(value, str) else repr(value)
