"""Put on PYTHONPATH by ``jitguard run``: activates the watcher from JITGUARD* variables (and the
warm-up from JITGUARD_WARMUP), then runs
whatever other ``sitecustomize`` the environment has (this one only shadows it for a moment)."""
import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    if os.environ.get("JITGUARD"):
        from jitguard.runtime.activate import activate_from_env

        activate_from_env()
    if os.environ.get("JITGUARD_WARMUP"):  # after the watcher's import hook: this one delegates to it
        from jitguard.runtime.warmup import arm_from_env

        arm_from_env()
except Exception as _exc:  # a broken activation must not break the user's program
    # Under `jitguard run` every Python the command starts runs this file, also ones (another
    # venv, a tool) that lack jitguard: leave a note for `jitguard run` to say once, at the end.
    _notes = os.environ.get("JITGUARD_ACTIVATION_NOTES")
    try:
        if not _notes:
            raise OSError
        with open(os.path.join(_notes, str(os.getpid())), "w", encoding="utf-8") as _fh:
            _fh.write(f"{sys.executable}\t{_exc}".replace("\n", " "))
    except OSError:
        print(f"jitguard: could not activate: {_exc}", file=sys.stderr)

# Chain to the next sitecustomize on the path, as if this one were not there.
_saved_path = list(sys.path)
_self = sys.modules.pop("sitecustomize", None)
try:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    importlib.import_module("sitecustomize")
except ImportError:
    if _self is not None:
        sys.modules["sitecustomize"] = _self
finally:
    sys.path[:] = _saved_path
