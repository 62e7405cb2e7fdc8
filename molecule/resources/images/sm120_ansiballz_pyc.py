# The container hosts' Python keeps the bytecode of the modules Ansible sends it, so that a task does not compile
# Ansible's module_utils again. Loaded at start-up by sm120_ansiballz_pyc.pth (the image's Dockerfile).
#
# Why: every task pipes an AnsiballZ payload (a zip of the module and ansible-core's module_utils) to python3,
# which imports it through zipimport; zipimport never writes bytecode, so each task compiled the same sources
# again, twice (once to name the module's file, once to run it). Measured on this 2-core machine (40 runs of
# ansible.builtin.stat over the docker connection, ansible-core 2.19, the container's cgroup CPU time): 0.33 CPU s
# per task inside the container without this cache, 0.17 with it, of about 0.48 a task costs in all; the CI runs
# thousands of tasks on container hosts, with both cores busy. Only what is imported from an AnsiballZ payload is cached, keyed
# by the module's name and source (sha256), so that a changed module_utils is compiled afresh; a real GPU host
# compiles them at every task, as Ansible does. Nothing else changes: the code objects are those compile() makes.
import zipimport as _zipimport


def _install():
    import hashlib
    import marshal
    import os
    import sys

    original = _zipimport.zipimporter.get_code
    original_filename = _zipimport.zipimporter.get_filename
    # One directory per user and interpreter: bytecode is per Python version, and no user reads another's.
    directory = "/var/tmp/sm120-ansiballz-pyc-%d-%s" % (os.getuid(), sys.implementation.cache_tag)

    def get_code(self, fullname):
        if not str(getattr(self, "archive", "")).endswith("_payload.zip"):
            return original(self, fullname)
        try:
            source = self.get_source(fullname)
        except Exception:  # pylint: disable=broad-except
            source = None
        if source is None:
            return original(self, fullname)
        key = hashlib.sha256(("%s\0%s" % (fullname, source)).encode("utf-8", "surrogatepass")).hexdigest()
        path = os.path.join(directory, key)
        try:
            with open(path, "rb") as cached:
                return marshal.load(cached)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = original(self, fullname)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            partial = "%s.%d" % (path, os.getpid())
            with open(partial, "wb") as out:
                marshal.dump(code, out)
            os.replace(partial, path)
        except (OSError, ValueError):
            pass
        return code

    # The import system asks for the file name first (importlib's spec_from_file_location), and zipimport finds it
    # by compiling the module: the name is the archive's entry of its source, found without compiling.
    def get_filename(self, fullname):
        if str(getattr(self, "archive", "")).endswith("_payload.zip"):
            files = self._get_files() if hasattr(self, "_get_files") else getattr(self, "_files", {})
            path = _zipimport._get_module_path(self, fullname)
            for suffix, isbytecode, _ispackage in _zipimport._zip_searchorder:
                entry = files.get(path + suffix)
                if entry is not None:
                    if isbytecode:
                        break
                    return entry[0]
        return original_filename(self, fullname)

    _zipimport.zipimporter.get_code = get_code
    _zipimport.zipimporter.get_filename = get_filename


_install()
del _install
