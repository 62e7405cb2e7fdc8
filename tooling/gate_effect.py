# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does a gate take effect? Evaluate the decision it changes, on the real source, per GPU.

A gate patch that anchors and compiles proves nothing: what counts is whether the
decision SGLang takes (fusion applies to this batch; custom allreduce serves this
group) comes out differently on an SM120 GPU, and the same as shipped on SM90 and
SM100. A *decision* is one boolean expression of SGLang's code:

    {id, file, function, condition, scope, sm120}

``function`` is the qualified name of the function or method holding it
(``CustomAllreduce.should_custom_ar``); ``condition`` is ``return`` (the function's
return expression) or text that the ``if`` test holding the decision contains (a
string, or a list of strings all contained; exactly one ``if`` of the function may
match). ``scope`` gives values for the names the expression reads that are not the
GPU's: parameters, locals, server arguments. A mapping in the scope stands for an
object whose attributes are its keys; one with the key ``__call__`` for a callable
returning that value. ``sm120`` is what the decision must be on SM120 once the gate
is in place.

The expression is evaluated with Python itself on the parsed file. Names resolve,
in order, to the scope, to the GPU model below (SGLang's architecture helpers,
``get_platform()``, ``torch.cuda``, ``envs``), to the module's own top-level
assignments (``_is_sm120_supported = _is_cuda and is_sm120_supported()``, itself
evaluated the same way), and to builtins. Every name must also be bound in the
real module, as SGLang would need it: imported, assigned, a parameter or a local.
A patched file that uses a name it never imports therefore fails here, as it would
fail on the GPU. A name nothing provides is an error that names it, never a guess.

Pure: source text in, booleans out. Runs on the controller and in tests.
"""

from __future__ import annotations

import ast
import builtins

# (major, minor) of each GPU the check runs as.
DEVICES = {"sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0)}


class EffectError(Exception):
    """A decision cannot be located or evaluated; the message names the file, function and name."""


class _Object:
    """An object of the scope: attributes from a mapping; an unknown attribute is an error."""

    def __init__(self, name, attributes):
        self._name = name
        self._attributes = attributes

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        try:
            return _value("%s.%s" % (self._name, attribute), self._attributes[attribute])
        except KeyError:
            raise EffectError("the decision reads %s.%s, which its scope does not give" % (self._name, attribute))


class _Callable:
    def __init__(self, name, result):
        self._name = name
        self._result = result

    def __call__(self, *args, **kwargs):
        return _value(self._name + "()", self._result)


def _value(name, value):
    if isinstance(value, dict):
        if "__call__" in value:
            return _Callable(name, value["__call__"])
        return _Object(name, value)
    return value


class _EnvVar:
    """One of SGLang's ``envs.NAME`` (sglang/srt/environ.py): its declared default, or the environment's value."""

    def __init__(self, name, kind, default, environment):
        self._name, self._kind, self._default, self._environment = name, kind, default, environment

    def is_set(self):
        return self._name in self._environment

    def get(self):
        if self._name not in self._environment:
            return self._default
        text = str(self._environment[self._name])
        if self._kind == "EnvBool":
            return text.strip().lower() in ("1", "true", "yes", "y", "on")
        if self._kind == "EnvInt":
            return int(text)
        if self._kind == "EnvFloat":
            return float(text)
        return text


def read_env_declarations(environ_source):
    """``NAME -> (kind, default)`` for the ``NAME = EnvBool(default)`` lines of SGLang's environ.py."""
    declared = {}
    for node in ast.walk(ast.parse(environ_source)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id.startswith("Env")):
            default = None
            if node.value.args:
                try:
                    default = ast.literal_eval(node.value.args[0])
                except ValueError:
                    default = None
            declared[node.targets[0].id] = (node.value.func.id, default)
    return declared


class _Envs:
    def __init__(self, declarations, environment):
        self._declarations, self._environment = declarations, environment

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._declarations:
            raise EffectError("envs.%s is not declared in sglang/srt/environ.py of this release" % name)
        kind, default = self._declarations[name]
        return _EnvVar(name, kind, default, self._environment)


class _Platform:
    """``get_platform()`` of SGLang 0.5.19+: the architecture flags of the GPU."""

    def __init__(self, major):
        self.is_cuda, self.is_hip = True, False
        self.is_npu = self.is_xpu = self.is_musa = self.is_cpu = False
        for arch in (90, 100, 110, 120):
            setattr(self, "is_sm%d" % arch, major * 10 == arch)

    def __getattr__(self, name):
        raise EffectError("get_platform().%s is not modelled by the effect check; add it to the decision's scope" % name)


class _Cuda:
    def __init__(self, capability):
        self._capability = capability

    def get_device_capability(self, device=None):
        return self._capability

    def is_available(self):
        return True


class _Torch:
    def __init__(self, capability):
        self.cuda = _Cuda(capability)


def device_world(capability, env_declarations=None, environment=None):
    """The names SGLang's architecture checks read, for a GPU of this (major, minor) capability.

    The helpers mirror sglang/srt/utils/common.py: ``is_sm<N>_supported`` compares the
    major version (so SM121 counts as SM120), ``is_sm120()`` the exact capability.
    """
    major = capability[0]
    environment = dict(environment or {})

    def helper(value):
        return lambda *args, **kwargs: value

    def bool_env(name, default="false"):
        return str(environment.get(name, default)).strip().lower() in ("1", "true", "yes", "y", "on")

    world = {
        "is_cuda": helper(True), "is_hip": helper(False), "is_musa": helper(False), "is_npu": helper(False),
        "is_xpu": helper(False), "is_cpu": helper(False), "is_flashinfer_available": helper(True),
        "is_sm90_supported": helper(major == 9), "is_sm100_supported": helper(major == 10),
        "is_sm110_supported": helper(major == 11), "is_sm120_supported": helper(major == 12),
        "is_sm120": helper(tuple(capability) == (12, 0)),
        "is_blackwell_supported": helper(major in (10, 11, 12)), "is_blackwell": helper(major in (10, 11, 12)),
        "get_platform": helper(_Platform(major)),
        "torch": _Torch(tuple(capability)),
        "get_bool_env_var": bool_env,
    }
    if env_declarations is not None:
        world["envs"] = _Envs(env_declarations, environment)
    return world


def _module_bindings(tree):
    """Names a module binds at top level: imports, assignments (last one wins), defs, classes."""
    imported, assigned, defined = set(), {}, set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imported.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigned[node.target.id] = node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Try):
            # try: from x import y / except ImportError: y = None
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    for alias in inner.names:
                        imported.add((alias.asname or alias.name).split(".")[0])
    return imported, assigned, defined


def find_function(tree, qualname):
    """The function or method named ``Class.method`` (or ``function``) anywhere in the module."""
    wanted = qualname.split(".")
    found = []

    def walk(node, stack):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                path = stack + [child.name]
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and path[-len(wanted):] == wanted:
                    found.append(child)
                walk(child, path)

    walk(tree, [])
    if len(found) != 1:
        raise EffectError("%d definitions of %s" % (len(found), qualname))
    return found[0]


def _function_locals(function):
    names = {arg.arg for arg in function.args.args + function.args.kwonlyargs + function.args.posonlyargs}
    for extra in (function.args.vararg, function.args.kwarg):
        if extra is not None:
            names.add(extra.arg)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def locate(source, function_name, condition):
    """(tree, function node, expression node) of a decision in a file's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise EffectError("does not parse: %s" % exc)
    function = find_function(tree, function_name)
    if condition == "return":
        returns = [node for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]
        if len(returns) != 1:
            raise EffectError("%s has %d return statements with a value; name the if test instead"
                              % (function_name, len(returns)))
        return tree, function, returns[0].value
    needles = [condition] if isinstance(condition, str) else list(condition)
    tests = [node.test for node in ast.walk(function) if isinstance(node, ast.If)
             and all(needle in (ast.get_source_segment(source, node.test) or "") for needle in needles)]
    if len(tests) != 1:
        raise EffectError("%d if tests of %s contain %r; the condition must pick exactly one"
                          % (len(tests), function_name, needles))
    return tree, function, tests[0]


def _free_names(node):
    return sorted({child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)})


class _Names(dict):
    """The evaluation namespace: resolves each name on first use, as described in the module docstring."""

    def __init__(self, where, scope, world, bindings, local_names):
        super().__init__()
        self._where, self._scope, self._world = where, scope, world
        self._imported, self._assigned, self._defined = bindings
        self._locals = local_names
        self._resolving = set()

    def _bound(self, name):
        return (name in self._locals or name in self._imported or name in self._assigned
                or name in self._defined or hasattr(builtins, name))

    def __missing__(self, name):
        if not self._bound(name):
            raise EffectError("%s: %s is neither imported, assigned nor a parameter there; the code would raise "
                              "NameError" % (self._where, name))
        if name in self._scope:
            value = _value(name, self._scope[name])
        elif name in self._world and name not in self._assigned:
            value = self._world[name]
        elif name in self._assigned and name not in self._locals:
            if name in self._resolving:
                raise EffectError("%s: %s is defined in terms of itself" % (self._where, name))
            self._resolving.add(name)
            value = self.evaluate(self._assigned[name])
            self._resolving.discard(name)
        elif hasattr(builtins, name):
            value = getattr(builtins, name)
        else:
            raise EffectError("%s: the decision reads %s; give its value in the decision's scope" % (self._where, name))
        self[name] = value
        return value

    def evaluate(self, node):
        for name in _free_names(node):
            self[name]  # noqa: B018 - resolves (and checks) every name before Python evaluates the expression
        code = compile(ast.Expression(body=node), self._where, "eval")
        try:
            return eval(code, {"__builtins__": builtins}, self)  # pylint: disable=eval-used
        except EffectError:
            raise
        except Exception as exc:  # the expression itself failed, as it would in SGLang
            raise EffectError("%s: evaluating the decision raised %s: %s" % (self._where, type(exc).__name__, exc))


def evaluate_decision(source, decision, capability, env_declarations=None, environment=None):
    """The decision's value on a GPU of this capability, as a bool."""
    where = "%s:%s" % (decision["file"], decision["function"])
    try:
        tree, function, expression = locate(source, decision["function"], decision["condition"])
        names = _Names(where, decision.get("scope") or {}, device_world(capability, env_declarations, environment),
                       _module_bindings(tree), _function_locals(function))
        return bool(names.evaluate(expression))
    except EffectError as exc:
        message = str(exc)
        raise EffectError(message if message.startswith(where) else "%s: %s" % (where, message))


def check_effect(shipped, gated, decision, env_declarations=None, environment=None):
    """Evaluate a decision on the shipped and the gated code for SM90, SM100 and SM120; list what is wrong.

    ``shipped`` and ``gated`` are the file's source without and with the gate (the
    same text for an option gate, whose effect is ``environment``). The gated code
    on SM120 must give ``decision['sm120']`` and the shipped code the opposite; on
    SM90 and SM100 the gated code must decide as the shipped code does under the
    same environment. Returns ``(values, problems)``: the values per device and
    variant, and one message per broken expectation (empty: it takes effect).
    """
    environment = dict(environment or {})
    values = {}
    for device, capability in DEVICES.items():
        values[device] = {
            "shipped": evaluate_decision(shipped, decision, capability, env_declarations, {}),
            "gated": evaluate_decision(gated, decision, capability, env_declarations, environment),
        }
        if device != "sm120":
            values[device]["shipped_same_env"] = evaluate_decision(shipped, decision, capability,
                                                                   env_declarations, environment)
    wanted = bool(decision["sm120"])
    problems = []
    where = "%s %s (%s)" % (decision["file"], decision["function"], decision.get("id", "decision"))
    if values["sm120"]["gated"] != wanted:
        problems.append("%s: on SM120 the gated code decides %s, the gate needs %s"
                        % (where, values["sm120"]["gated"], wanted))
    if values["sm120"]["shipped"] == wanted:
        problems.append("%s: on SM120 the shipped code already decides %s; the gate changes nothing"
                        % (where, wanted))
    for device in ("sm90", "sm100"):
        if values[device]["gated"] != values[device]["shipped_same_env"]:
            problems.append("%s: on %s the gated code decides %s where the shipped code decides %s"
                            % (where, device.upper(), values[device]["gated"], values[device]["shipped_same_env"]))
    return values, problems


def check_native(shipped, decision, env_declarations=None):
    """For an upstream gate: the shipped code on SM120 already decides ``decision['sm120']``."""
    value = evaluate_decision(shipped, decision, DEVICES["sm120"], env_declarations, {})
    if value != bool(decision["sm120"]):
        return value, ["%s %s: on SM120 the shipped code decides %s, not %s as the upstream entry says"
                       % (decision["file"], decision["function"], value, bool(decision["sm120"]))]
    return value, []
