# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one SGLang release resolves a DSA model's attention to, run on the release's own code, per GPU.

GLM-5 (``GlmMoeDsaForCausalLM``) is a DeepSeek-sparse-attention model. Which attention SGLang then runs is decided
in three steps of the release's server-argument resolution, and the steps moved between releases:

* the attention backend: ``dsa`` (``nsa`` before 0.5.13) where none of the three attention flags is set;
* the KV cache dtype: ``auto`` becomes ``fp8_e4m3`` on SM >= 10, ``bf16`` is spelled ``bfloat16``;
* the DSA prefill and decode backends, from the dtype and the GPU's major version (0.5.17 adds GLM's SM12x FP8 arm,
  ``flashinfer_sparse_mla``).

0.5.9 - 0.5.14 hold them as ``ServerArgs`` methods (``_set_default_{nsa,dsa}_kv_cache_dtype``,
``_set_default_{nsa,dsa}_backends``, and an ``if self.is_attention_backend_not_set():`` statement of
``_handle_model_specific_adjustments``); 0.5.15 and later as functions of ``arg_groups/overrides.py``
(``_dsa_kv_cache_dtype_default``, ``_dsa_split_backend_resolution``) and the ``if
is_attention_backend_not_set(cfg):`` statement of the DeepSeek family's model override. Which shape a release has is
read from its source, not from its version number.

Importing SGLang needs torch and a GPU, so the functions are executed from the parsed source instead: each function
or statement is compiled as shipped and run in a namespace that resolves every name lazily, in order, to the
device (``gate_effect.device_world``: ``get_platform()``, ``torch.cuda.get_device_capability()``, the architecture
helpers), to the checkpoint's config (``model_config_of``/``get_model_config`` give an object whose ``hf_config`` is
the config given), to the module's own top-level definitions and assignments, and through the module's own imports
to the other modules of the release (the same lazy way), the standard library's ``typing``/``logging`` and builtins.
A name nothing provides is an error naming it, never a guess. The server arguments are a record of the fields the
release's parser defines, with the parser's defaults for the few the resolution reads and the profile's flags on top.

Pure: source text in, a mapping out. Runs in tests on the real wheels (tests/unit/tooling/test_launch_resolution.py).
"""

from __future__ import annotations

import ast
import builtins
import logging
import typing

from ansible_collections.sm120.sglang.tooling.gate_effect import EffectError, device_world

# The server arguments the resolution reads, with the parser's defaults (ServerArgs of every release 0.5.9 - 0.5.23:
# kv_cache_dtype "auto", the rest None/False/1); a profile's flags replace them by the parser's dest.
DEFAULTS = {
    "attention_backend": None, "prefill_attention_backend": None, "decode_attention_backend": None,
    "kv_cache_dtype": "auto", "quantization": None, "enable_hisparse": False, "dcp_size": 1,
    "nsa_prefill_backend": None, "nsa_decode_backend": None, "dsa_prefill_backend": None,
    "dsa_decode_backend": None, "dsa_topk_backend": None, "speculative_algorithm": None,
    "enable_prefill_cp": False, "enable_nsa_prefill_context_parallel": False,
}
_STDLIB = {"typing": typing, "logging": logging}
_QUIET = logging.getLogger("sm120.launch_resolution")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class Unknown(EffectError, AttributeError):
    """An attribute the record or config does not have: an AttributeError for getattr(x, name, default)."""


class Record:
    """Server arguments (or a checkpoint config): attributes from a mapping, set ones kept; ``methods`` resolves
    the rest to the release's own methods of the class the record stands for."""

    def __init__(self, name, values, methods=None):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_methods", methods)

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if attribute in self._values:
            return self._values[attribute]
        if self._methods is not None:
            method = self._methods(attribute)
            if method is not None:
                return method.__get__(self)
        raise Unknown("%s has no %s" % (self._name, attribute))

    def __setattr__(self, attribute, value):
        self._values[attribute] = value

    def values(self):
        return dict(self._values)


class _Namespace(dict):
    """A module's globals: each name resolved on first use (see the module docstring)."""

    def __init__(self, module):
        super().__init__()
        self._module = module
        self["__builtins__"] = module.release.builtins
        self["__name__"] = module.dotted

    def __missing__(self, name):
        value = self._module.resolve(name)
        self[name] = value
        return value


class _Module:
    """One module of the release, parsed; its names resolved on demand."""

    def __init__(self, release, dotted, source):
        self.release, self.dotted, self.path = release, dotted, dotted.replace(".", "/") + ".py"
        self.tree = ast.parse(source)
        self.source = source
        self.namespace = _Namespace(self)
        self._defs, self._assigns, self._imports = {}, {}, {}
        for node in self.tree.body:
            self._bind(node)

    def _bind(self, node):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            self._defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self._assigns[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self._assigns[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                self._imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self._imports[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            for child in node.body:
                self._bind(child)

    def definition(self, name):
        return self._defs.get(name)

    def resolve(self, name):
        world = self.release.world
        if name in world:
            return world[name]
        if name in self._defs:
            return self.compile_def(self._defs[name])
        if name in self._assigns:
            return eval(compile(ast.Expression(self._assigns[name]), self.path, "eval"),  # pylint: disable=eval-used
                        self.namespace)
        if name in self._imports:
            module, attribute = self._imports[name]
            found = self.release.import_module(module)
            return found if attribute is None else getattr(found, attribute)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise EffectError("%s: %s is neither defined, assigned nor imported there" % (self.path, name))

    def compile_def(self, node, namespace=None):
        """A function of this module as shipped, its decorators left out (registries such as register_post_process
        only record it), compiled into this module's namespace."""
        if isinstance(node, ast.ClassDef):
            raise EffectError("%s: %s is a class; the resolution executes functions only" % (self.path, node.name))
        bare = ast.FunctionDef(name=node.name, args=node.args, body=node.body, decorator_list=[],
                               returns=None, type_comment=None)
        ast.copy_location(bare, node)
        code = compile(ast.fix_missing_locations(ast.Module(body=[bare], type_ignores=[])), self.path, "exec")
        target = self.namespace if namespace is None else namespace
        scratch = _Overlay(target)
        exec(code, scratch)  # pylint: disable=exec-used
        return scratch.defined[node.name]


class _Overlay(dict):
    """exec's globals for one def: reads go to the module's namespace, the def lands in ``defined``."""

    def __init__(self, namespace):
        super().__init__()
        self._namespace, self.defined = namespace, {}
        # A function takes its builtins from its globals' own "__builtins__" (an exact lookup): the release's
        # __import__ there, so that imports inside a function body resolve through the release too.
        dict.__setitem__(self, "__builtins__", namespace["__builtins__"])

    def __setitem__(self, key, value):
        self.defined[key] = value

    def __missing__(self, name):
        return self._namespace[name]


class _ModuleProxy:
    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._module.namespace[name]


class Release:
    """The release's source (``read(path) -> text or None``) and the world it runs in."""

    def __init__(self, read_source, capability, hf_config):
        self._read, self._modules = read_source, {}
        world = device_world(capability)
        world.pop("get_bool_env_var", None)
        config = Record("the checkpoint's config", hf_config)
        model_config = Record("ModelConfig", {"hf_config": config})
        world.update({
            "logger": _QUIET,
            "model_config_of": lambda view: model_config,
            "get_model_config": lambda *args: model_config,
            # SGLang's views over the server-argument record (arg_groups/model_override_base.py): the record itself.
            "resolving_view": lambda record: record, "resolved_view": lambda record: record,
            "record_of": lambda record: record,
        })
        self.world = world
        self.builtins = dict(vars(builtins))
        self.builtins["__import__"] = self._import

    def module(self, dotted):
        if dotted not in self._modules:
            source = self._read(dotted.replace(".", "/") + ".py")
            if source is None:
                source = self._read(dotted.replace(".", "/") + "/__init__.py")
            if source is None:
                raise EffectError("the release has no module %s" % dotted)
            self._modules[dotted] = _Module(self, dotted, source)
        return self._modules[dotted]

    def import_module(self, dotted):
        if dotted == "torch":
            return self.world["torch"]
        if dotted in _STDLIB:
            return _STDLIB[dotted]
        if dotted.split(".")[0] == "sglang":
            return _ModuleProxy(self.module(dotted))
        raise EffectError("the resolution imports %s, which is not modelled (only sglang, torch, typing, logging)"
                          % dotted)

    def _import(self, name, globals_=None, locals_=None, fromlist=(), level=0):
        if level:
            raise EffectError("relative import of %s is not modelled" % name)
        found = self.import_module(name)
        if fromlist or "." not in name:
            return found
        return self.import_module(name.split(".")[0])


def _methods_of(module, class_name):
    cls = module.definition(class_name)
    if cls is None:
        return None
    methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
    compiled = {}

    def method(name):
        if name not in methods:
            return None
        if name not in compiled:
            compiled[name] = module.compile_def(methods[name])
        return compiled[name]

    return method


def _attention_default(function):
    """The ``if [self.]is_attention_backend_not_set(...)`` statements of ``function`` that set the attention backend
    to the sparse one (``dsa``, ``nsa`` before 0.5.13)."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.If) and "is_attention_backend_not_set" in ast.unparse(node.test):
            for statement in node.body:
                if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                        and statement.value.value in ("dsa", "nsa")
                        and "attention_backend" in ast.unparse(statement.targets[0])):
                    found.append(node)
                    break
    return found


def _run_statement(module, node, names):
    code = compile(ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[])), module.path, "exec")
    scope = _Overlay(module.namespace)
    scope.defined.update(names)
    scope.__class__ = _Locals
    exec(code, scope)  # pylint: disable=exec-used


class _Locals(_Overlay):
    """Globals for one statement: the names given first (``self``, ``cfg``, ``overrides``), then the module's."""

    def __getitem__(self, name):
        if name in self.defined:
            return self.defined[name]
        return dict.__getitem__(self, name)


def resolve(read_source, arguments, capability, hf_config):
    """The attention a DSA model gets: ``{attention_backend, kv_cache_dtype, prefill, decode, shape, where}``.

    ``arguments`` maps the parser's dests to values (the profile's flags), over ``DEFAULTS``; ``capability`` is the
    GPU's (major, minor); ``hf_config`` the checkpoint's config.json. ``prefill``/``decode`` are the DSA backends
    where the attention backend is the sparse one (``dsa``/``nsa``), else the attention backend itself (dense MLA).
    ``where`` names the functions that decided, ``file:function:line``.
    """
    release = Release(read_source, capability, hf_config)
    values = dict(DEFAULTS)
    values.update(arguments)
    # ServerArgs.get_model_config() builds SGLang's ModelConfig from the checkpoint: here, the config given.
    values["get_model_config"] = release.world["get_model_config"]
    major = capability[0]
    overrides = release.module("sglang.srt.arg_groups.overrides") if read_source(
        "sglang/srt/arg_groups/overrides.py") is not None else None
    if overrides is not None and overrides.definition("_dsa_split_backend_resolution") is not None:
        return _resolve_pipeline(release, overrides, values)
    return _resolve_methods(release, values, major)


def _resolve_methods(release, values, major):
    server_args = release.module("sglang.srt.server_args")
    methods = _methods_of(server_args, "ServerArgs")
    prefix = "dsa" if methods("_set_default_dsa_backends") is not None else "nsa"
    kv_default, split = "_set_default_%s_kv_cache_dtype" % prefix, "_set_default_%s_backends" % prefix
    if methods(split) is None or methods(kv_default) is None:
        raise EffectError("sglang/srt/server_args.py: ServerArgs has neither the dsa nor the nsa backend methods")
    record = Record("ServerArgs", values, methods)
    handler = server_args.definition("ServerArgs")
    adjust = next(item for item in handler.body if isinstance(item, ast.FunctionDef)
                  and item.name == "_handle_model_specific_adjustments")
    statements = _attention_default(adjust)
    if len(statements) != 1:
        raise EffectError("sglang/srt/server_args.py: %d attention defaults in _handle_model_specific_adjustments"
                          % len(statements))
    _run_statement(server_args, statements[0], {"self": record})
    kv_args = methods(kv_default).__code__.co_varnames[1:methods(kv_default).__code__.co_argcount]
    getattr(record, kv_default)(*([major, record.quantization][:len(kv_args)]))
    split_args = methods(split).__code__.co_varnames[1:methods(split).__code__.co_argcount]
    getattr(record, split)(*([record.kv_cache_dtype, major] if len(split_args) == 2 else [major]))
    resolved = record.values()
    resolved.pop("get_model_config")
    where = ["sglang/srt/server_args.py:ServerArgs._handle_model_specific_adjustments:%d" % statements[0].lineno]
    for name in (kv_default, split):
        node = next(item for item in handler.body if isinstance(item, ast.FunctionDef) and item.name == name)
        where.append("sglang/srt/server_args.py:ServerArgs.%s:%d" % (name, node.lineno))
    return _result(resolved, prefix, "ServerArgs methods", where)


def _resolve_pipeline(release, overrides, values):
    methods = _methods_of(release.module("sglang.srt.server_args"), "ServerArgs")
    view = Record("ServerArgs", values, methods)
    module, function, node = _family_override(release, overrides)
    # The family override as shipped, on the record and the checkpoint's config: it returns its declarations, of
    # which the resolution takes the attention backend.
    declared = module.compile_def(function)(view, release.world["model_config_of"](view).hf_config)
    view.attention_backend = declared.get("attention_backend", view.attention_backend)
    where = ["%s:%s:%d" % (module.path, function.name, node.lineno)]
    for name in ("_dsa_kv_cache_dtype_default", "_dsa_split_backend_resolution"):
        declared = overrides.namespace[name](view)
        for field, value in declared.items():
            setattr(view, field, value)
        where.append("%s:%s:%d" % (overrides.path, name, overrides.definition(name).lineno))
    return _result(view.values(), "dsa", "arg_groups pipeline", where)


def _family_override(release, overrides):
    """The module and statement that default a DSA model's attention backend (the DeepSeek family override)."""
    candidates = [(overrides, function, node) for function in overrides.tree.body
                  if isinstance(function, ast.FunctionDef)
                  for node in _attention_default(function)]
    try:
        deepseek = release.module("sglang.srt.arg_groups.model_overrides.deepseek_v2")
    except EffectError:
        deepseek = None
    if deepseek is not None:
        candidates += [(deepseek, function, node) for function in ast.walk(deepseek.tree)
                       if isinstance(function, ast.FunctionDef)
                       for node in _attention_default(function)]
    if len(candidates) != 1:
        raise EffectError("%d statements default the DSA attention backend (overrides.py, model_overrides/"
                          "deepseek_v2.py); the resolution needs exactly one" % len(candidates))
    return candidates[0]


def _result(values, prefix, shape, where):
    attention = values["attention_backend"]
    sparse = attention in ("dsa", "nsa")
    prefill = values["%s_prefill_backend" % prefix] if sparse else values.get("prefill_attention_backend") or attention
    decode = values["%s_decode_backend" % prefix] if sparse else values.get("decode_attention_backend") or attention
    return {"attention_backend": attention, "kv_cache_dtype": values["kv_cache_dtype"], "sparse": sparse,
            "prefill": prefill, "decode": decode, "shape": shape, "where": where}
