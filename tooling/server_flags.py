# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flags `python -m sglang.launch_server` of one SGLang release accepts, read from its source.

Importing sglang.srt.server_args needs torch, so the release's parser definitions are read with
``ast`` and argparse's rules applied to them. Three styles: ``parser.add_argument(...)`` in
``ServerArgs.add_cli_args`` (0.5.8 - 0.5.13, and special cases later); ``A[T, Arg(...)]`` fields of
the ServerArgs dataclass (0.5.14 - 0.5.19); the same fields on the classes of arg_groups/fields/
gathered into ServerArgs (0.5.20+). Choices are resolved where the source binds them to literals;
what is computed at run time is reported unknown with its expression, never guessed. Lists that
plugins extend through SGLang's ``add_*_choices`` hooks are read as shipped. Pure, stdlib only.
"""

from __future__ import annotations

import ast
import hashlib
import re

from ansible_collections.sm120.sglang.tooling.server_source import (
    _DEEP,
    _literal,
    _qualname,
    _Release,
    _Scope,
    _text,
    _Unresolved,
)

SERVER_ARGS = "sglang.srt.server_args"
# sha256 of add_cli_args_from_dataclass and the helpers it decides with, without docstrings and
# annotations. _field_record mirrors exactly these rules, so a release that changes them fails
# loudly until someone has read the new ones.
DATACLASS_RULES = {
    "ce573f30401f5b1c": "0.5.14 - 0.5.19 (dataclass ServerArgs)",
    "d273f4147075c43e": "0.5.20 - 0.5.23 (msgspec ServerArgs; record_fields, list[...] only)",
}
_RULE_FUNCTIONS = ("add_cli_args_from_dataclass", "_unwrap_annotated", "_unwrap_optional",
                   "_unwrap_literal", "_infer_type_func", "_field_to_cli_name")
_ARG_FIELDS = ("help", "choices", "aliases", "cli_name", "type_parser", "nargs", "required",
               "action", "action_kwargs", "const", "no_cli")
_SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
_TYPES = {"builtins.str": "str", "builtins.int": "int", "builtins.float": "float"}


class ServerFlagsError(Exception):
    """The release's parser definitions cannot be read."""


def _action(release, module, node, scope=None):
    """(name, nargs it implies or "unknown", whether its __call__ stores, whether it calls parser.error)."""
    if node is None or isinstance(node, ast.Constant) and node.value in _SWITCH_ACTIONS | {"store", "append", "extend"}:
        name = "store" if node is None else node.value
        return name, 0 if name in _SWITCH_ACTIONS else None, True, False
    found = release.ref(module, node, scope)
    if _qualname(found) == "argparse.BooleanOptionalAction":
        return "BooleanOptionalAction", 0, True, False
    if found[0] != "def" or not isinstance(found[2], ast.ClassDef):
        return ast.unparse(node), "unknown", None, False
    home, cls = found[1], found[2]
    methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
    if not all(_qualname(release.ref(home, base)) == "argparse.Action" for base in cls.bases):
        return cls.name, "unknown", None, False
    nargs, init = None, methods.get("__init__")
    if init is not None:  # the nargs= default of its __init__, e.g. DeprecatedAction(..., nargs=0, **kwargs)
        params = init.args.args + init.args.kwonlyargs
        defaults = [None] * (len(init.args.args) - len(init.args.defaults)) + init.args.defaults + init.args.kw_defaults
        nargs = next((_literal(release, home, default) for param, default in zip(params, defaults)
                      if param.arg == "nargs" and default is not None), None)
    body = ast.unparse(methods["__call__"]) if "__call__" in methods else "setattr("
    return cls.name, nargs, "setattr(" in body or "namespace." in body, "parser.error(" in body


def _record(release, module, scope, options, dest, given, style, where):
    """One record per option string; `given` maps add_argument's keywords to nodes."""
    action, nargs, stores, errors = _action(release, module, given.get("action"), scope)
    if "nargs" in given:
        nargs = _literal(release, module, given["nargs"], scope)
    choices, known, source = None, True, None
    if given.get("choices") is not None:
        try:
            value = _literal(release, module, given["choices"], scope)
            choices = None if value is None else tuple(sorted(value, key=str) if isinstance(value, set) else value)
            source = ast.unparse(given["choices"])
        except _Unresolved as why:
            known, source = False, "%s: computed at run time (%s)" % (ast.unparse(given["choices"]), why)
    type_node = given.get("type", ast.Name("str"))
    help_text = _text(release, module, given["help"], scope) if "help" in given else ""
    new_flag = _text(release, module, given["new_flag"], scope) if "new_flag" in given else None
    deprecated = None
    if new_flag or "Deprecated" in action or re.search(r"deprecat", help_text, re.I):
        deprecated = "use " + new_flag if new_flag else help_text[:160]
    required, refuses = given.get("required"), errors and "error_message" in given
    record = {
        "dest": dest, "takes_value": None if nargs == "unknown" else nargs != 0,
        "nargs": None if nargs == "unknown" else nargs,
        "type": None if nargs == 0 else _TYPES.get(_qualname(release.ref(module, type_node, scope)),
                                                   ast.unparse(type_node)),
        "choices": choices, "choices_known": known, "choices_from": source,
        "required": bool(required is not None and _literal(release, module, required, scope)),
        "action": action, "deprecated": deprecated, "ignored": stores is False and not refuses,
        "rejects": _text(release, module, given["error_message"], scope) if refuses else None,
        "style": style, "where": where,
    }
    if action == "BooleanOptionalAction":
        options = options + ["--no-" + option[2:] for option in options if option.startswith("--")]
    return {option: dict(record) for option in options}


def _call_flags(release, module, call, scope):
    given, where = {keyword.arg: keyword.value for keyword in call.keywords}, "%s:%s" % (module.path, call.lineno)
    if None in given:
        raise ServerFlagsError("%s: add_argument(**...) cannot be read statically" % where)
    options = [name for name in (_literal(release, module, arg, scope) for arg in call.args)
               if isinstance(name, str) and name.startswith("-")]
    if not options:
        return {}
    first = ([option for option in options if option.startswith("--")] or options)[0]
    dest = _literal(release, module, given["dest"], scope) if "dest" in given else first.lstrip("-").replace("-", "_")
    return _record(release, module, scope, options, dest, given, "add_argument", where)


def _type(release, module, node, depth=0):
    """An annotation as arg_utils sees it: ("name", qualname), ("none",), ("literal", values),
    ("list", element), ("union", members) or ("other", text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and depth < _DEEP:
        return _type(release, module, ast.parse(node.value, mode="eval").body, depth + 1)
    head = _qualname(release.ref(module, node.value)) if isinstance(node, ast.Subscript) else ""
    args = (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]) if head else []
    if isinstance(node, ast.Constant) and node.value is None:
        return ("none",)
    if isinstance(node, (ast.Name, ast.Attribute)):
        found = release.ref(module, node)
        return _type(release, found[1], found[2], depth + 1) if found[0] == "value" and depth < _DEEP \
            else ("name", _qualname(found) or ast.unparse(node))
    if head in ("typing.Literal", "typing_extensions.Literal"):
        return ("literal", [_literal(release, module, arg) for arg in args])
    if head in ("typing.List", "builtins.list"):
        return ("list", _type(release, module, args[0], depth + 1))
    if head in ("typing.Optional", "typing.Union") or isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        members = [_type(release, module, arg, depth + 1) for arg in (args or [node.left, node.right])]
        flat = []
        for member in members + [("none",)] * (head == "typing.Optional"):
            flat.extend(item for item in (member[1] if member[0] == "union" else [member]) if item not in flat)
        return flat[0] if len(flat) == 1 else ("union", flat)  # as typing itself flattens and dedupes
    return ("other", ast.unparse(node))


def _inferred(kind):
    """arg_utils._infer_type_func: str, int and float are themselves, anything else parses as str."""
    return ast.Name(_TYPES.get(kind[1], "str") if kind[0] == "name" else "str")


def _field_record(release, module, node, style):
    """arg_utils.add_cli_args_from_dataclass for one field (an AnnAssign), branch by branch."""
    annotation = node.annotation
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple)
            and _qualname(release.ref(module, annotation.value)) in ("typing.Annotated",
                                                                     "typing_extensions.Annotated")):
        return {}
    meta = None
    for item in annotation.slice.elts[1:]:  # the first Arg(...) or bare string wins (_unwrap_annotated)
        if isinstance(item, ast.Call) and _qualname(release.ref(module, item.func)).endswith("arg_utils.Arg"):
            meta = dict(zip(_ARG_FIELDS, item.args), **{keyword.arg: keyword.value for keyword in item.keywords})
            break
        if isinstance(item, ast.Constant) and isinstance(item.value, str) or isinstance(item, ast.JoinedStr):
            meta = {"help": item}
            break
    if meta is None:
        return {}
    # Arg(x=None) is Arg's own default: the rules below test `is not None` or truthiness.
    meta = {key: item for key, item in meta.items() if not (isinstance(item, ast.Constant) and item.value is None)}

    def value(key):
        return _literal(release, module, meta[key]) if key in meta else None

    if value("no_cli"):
        return {}
    name, where = node.target.id, "%s:%s" % (module.path, node.lineno)
    options = [value("cli_name") or "--" + name.replace("_", "-")] + list(value("aliases") or [])
    given = {"help": meta.get("help", ast.Constant(""))}
    if "action" in meta:  # the custom-action branch passes action_kwargs and nothing else
        extra = meta.get("action_kwargs", ast.Dict([], []))
        if not isinstance(extra, ast.Dict):
            raise ServerFlagsError("%s: action_kwargs=%s cannot be read statically" % (where, ast.unparse(extra)))
        given.update({_literal(release, module, key): item for key, item in zip(extra.keys, extra.values)})
        return _record(release, module, None, options, name, dict(given, action=meta["action"]), style, where)
    kind = _type(release, module, annotation.slice.elts[0])
    real = [member for member in kind[1] if member != ("none",)] if kind[0] == "union" else [kind]
    kind = real[0] if len(real) == 1 else kind  # _unwrap_optional, on the field's own type only
    try:
        truthy = bool(value("choices"))  # `if arg_meta.choices:` / `arg_meta.choices or literal_vals`
    except _Unresolved:
        truthy = True
    if truthy:
        given["choices"] = meta["choices"]
    if kind[0] == "literal":
        first = ("name", "builtins." + type(([*kind[1], ""])[0]).__name__)
        given["type"] = meta.get("type_parser", _inferred(first))
        given.setdefault("choices", ast.Constant(tuple(kind[1])))
    elif kind[0] == "list" and "type_parser" not in meta:
        given.update(type=_inferred(kind[1]), nargs=meta["nargs"] if value("nargs") else ast.Constant("+"))
    elif kind == ("name", "builtins.bool"):
        given = {"help": given["help"], "action": ast.Constant("store_true")}
    else:
        given["type"] = meta.get("type_parser", _inferred(kind))
        given.update({"nargs": meta["nargs"]} if value("nargs") else {})
        default = node.value is not None and not (
            isinstance(node.value, ast.Call) and ast.unparse(node.value.func).rsplit(".", maxsplit=1)[-1] == "field"
            and not {"default", "default_factory"} & {keyword.arg for keyword in node.value.keywords})
        if value("required") is True or value("required") is None and not default:
            given["required"] = ast.Constant(True)
    return _record(release, module, None, options, name, given, style, where)


def _rules_digest(arg_utils):
    functions = {node.name: node for node in arg_utils.tree.body if isinstance(node, ast.FunctionDef)}
    digest = hashlib.sha256()
    for name in _RULE_FUNCTIONS:
        if name not in functions:
            raise ServerFlagsError("%s has no %s; its rules cannot be mirrored" % (arg_utils.path, name))
        function = ast.parse(ast.unparse(functions[name])).body[0]
        if isinstance(function.body[0], ast.Expr) and isinstance(function.body[0].value, ast.Constant):
            function.body = function.body[1:] or [ast.Pass()]
        function.returns = None
        for argument in function.args.args + function.args.kwonlyargs:
            argument.annotation = None
        digest.update(ast.unparse(function).encode())
    return digest.hexdigest()[:16]


def _class_fields(release, home, cls, style):
    """(module, AnnAssign, style) for the fields of a class, those of its sglang base classes first."""
    fields = []
    for base in cls.bases:
        found = release.ref(home, base)
        if found[0] == "def" and isinstance(found[2], ast.ClassDef):
            fields.extend(_class_fields(release, found[1], found[2], style))
    return fields + [(home, item, style) for item in cls.body if isinstance(item, ast.AnnAssign)
                     and isinstance(item.target, ast.Name) and "ClassVar" not in ast.unparse(item.annotation)]


def _dataclass_fields(release, module, cls):
    """Every field ServerArgs is built from: its own, and from 0.5.20 those of the classes
    `collect_input_fields(_INPUT_NAMESPACES)` gathers into it."""
    fields = _class_fields(release, module, cls, "dataclass field")
    for statement in module.tree.body:
        call = getattr(statement, "value", None)
        if not (isinstance(call, ast.Call) and call.args
                and _qualname(release.ref(module, call.func)).endswith(".collect_input_fields")):
            continue
        listed = release.ref(module, call.args[0]) if isinstance(call.args[0], ast.Name) else ("value", 0, call.args[0])
        if listed[0] != "value" or not isinstance(listed[2], ast.List):
            raise ServerFlagsError("%s:%s: the classes gathered into ServerArgs cannot be read"
                                   % (module.path, call.lineno))
        for node in listed[2].elts:
            found = release.ref(module, node)
            if found[0] != "def" or not isinstance(found[2], ast.ClassDef):
                raise ServerFlagsError("%s:%s: %s, gathered into ServerArgs, is not a class in the release's source"
                                       % (module.path, call.lineno, ast.unparse(node)))
            fields.extend(_class_fields(release, found[1], found[2], "namespace field"))
    return fields


def read_server_flags(read_source):
    """Every option string the release's launch_server parser accepts, mapped to its record:
    dest, takes_value, nargs, type, choices, choices_known, choices_from, required, action,
    deprecated, ignored (accepted, stores nothing), rejects (parser.error message), style, where."""
    release = _Release(read_source)
    module = release.module(SERVER_ARGS)
    cls = next((node for node in (module.tree.body if module else [])
                if isinstance(node, ast.ClassDef) and node.name == "ServerArgs"), None)
    function = next((item for item in getattr(cls, "body", [])
                     if isinstance(item, ast.FunctionDef) and item.name == "add_cli_args"), None)
    if function is None:
        raise ServerFlagsError("no ServerArgs.add_cli_args found; looked at %s" % ", ".join(release.looked_at))
    scope, flags = _Scope(function.body), {}
    for call in sorted((node for node in ast.walk(function) if isinstance(node, ast.Call)), key=lambda n: n.lineno):
        try:
            found = _registered(release, module, cls, scope, call)
        except _Unresolved as why:
            raise ServerFlagsError("%s:%s: %s cannot be read statically" % (module.path, call.lineno, why))
        flags.update({option: record for option, record in found.items() if option not in flags})
    if not flags:
        raise ServerFlagsError("none of the known styles (add_argument calls, Annotated fields) found; looked at %s"
                               % ", ".join(release.looked_at))
    return flags


def _registered(release, module, cls, scope, call):
    """The records one call in add_cli_args registers: add_argument or add_cli_args_from_dataclass."""
    found = {}
    if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
        found = _call_flags(release, module, call, scope)
    elif _qualname(release.ref(module, call.func, scope)).endswith("arg_utils.add_cli_args_from_dataclass"):
        arg_utils = release.ref(module, call.func, scope)[1]
        digest = _rules_digest(arg_utils)
        if digest not in DATACLASS_RULES:
            raise ServerFlagsError("%s: add_cli_args_from_dataclass follows rules this reader was not taught "
                                   "(digest %s; known: %s); read them and extend server_flags.py"
                                   % (arg_utils.path, digest, "; ".join(DATACLASS_RULES.values())))
        only = {keyword.arg: keyword.value for keyword in call.keywords}.get("fields")
        only = None if only is None else set(_literal(release, module, only, scope))
        for home, node, style in _dataclass_fields(release, module, cls):
            if only is None or node.target.id in only:
                records = _field_record(release, home, node, style)
                found.update({option: record for option, record in records.items() if option not in found})
    return found
