"""The `assay` command, installed from the `assay-eval` wheel.

The wheel puts the `assay` executable in the environment's scripts directory (`bin/` or
`Scripts\\`); this package only finds it, for code that runs assay from Python::

    import subprocess
    from assay_eval import find_assay_bin

    subprocess.run([find_assay_bin(), "run", "my-project"], check=False)

`python -m assay_eval ARGS` runs it too.

:func:`check` checks a reply against assertions (docs/assertions.md) with the binary, from
any Python test::

    from assay_eval import check

    result = check("Paris is the capital.", [{"type": "icontains", "value": "paris"}])
    assert result, result  # the message lists each failed assertion and why

``python -m assay_eval.worker pkg.module:function`` serves a Python function to assay as the
product under test (docs/python-worker.md).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from assay_eval._check import AssertionOutcome, CheckResult, check

__all__ = [
    "ASSAY_BIN_ENV",
    "AssertionOutcome",
    "CheckResult",
    "__version__",
    "check",
    "find_assay_bin",
]


def _version() -> str:
    """The installed distribution's version, or ``0.0.0+unknown`` (run from a checkout)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python 3.8 has importlib.metadata
        return "0.0.0+unknown"
    try:
        return version("assay-eval")
    except PackageNotFoundError:
        return "0.0.0+unknown"


#: The version of the installed ``assay-eval`` package (``0.0.0+unknown`` when not installed).
__version__ = _version()

#: The environment variable that names the binary to use instead of the installed one.
ASSAY_BIN_ENV = "ASSAY_BIN"


def find_assay_bin() -> str:
    """Return the path of the `assay` executable.

    Looks, in order, at:

    1. the ``ASSAY_BIN`` environment variable, when it is set (the file must exist);
    2. the scripts directory of the installation this package belongs to: the current
       environment's (a virtual environment's ``bin/``), the base interpreter's, the user
       scheme's (``pip install --user``: ``~/.local/bin``), and the prefix above the package
       (``pip install --prefix``/``--target``);
    3. ``PATH`` (:func:`shutil.which`).

    Raises :class:`FileNotFoundError` naming every place it looked.
    """
    exe = "assay" + (sysconfig.get_config_var("EXE") or "")

    override = os.environ.get(ASSAY_BIN_ENV)
    if override:
        if os.path.isfile(override):
            return override
        raise FileNotFoundError(
            f"{ASSAY_BIN_ENV} is set to {override!r}, which is not a file: "
            f"point it at an assay executable, or unset it to use the installed one"
        )

    looked = []
    for directory in _script_dirs():
        if not directory or directory in looked:
            continue
        looked.append(directory)
        path = os.path.join(directory, exe)
        if os.path.isfile(path):
            return path

    found = shutil.which(exe)
    if found:
        return found

    places = os.linesep.join(f" - {d}" for d in looked)
    raise FileNotFoundError(
        f"cannot find the {exe} executable; looked in:{os.linesep}{places}{os.linesep}"
        f" - PATH{os.linesep}"
        f"Reinstall the assay-eval package, or set {ASSAY_BIN_ENV} to the executable's path"
    )


def _script_dirs() -> list[str | None]:
    package_dir = os.path.dirname(os.path.abspath(__file__))
    return [
        # The current environment (a virtual environment's bin/ or Scripts\).
        sysconfig.get_path("scripts"),
        # The base interpreter's, when the package is installed there.
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        # The user scheme's: `pip install --user` (e.g. ~/.local/bin).
        _user_scripts(),
        # `pip install --prefix P`: the package is in P/lib/pythonX.Y/site-packages/assay_eval.
        _prefix_scripts(package_dir),
        # `pip install --target T`: the package is T/assay_eval, the binary T/bin/assay.
        os.path.join(os.path.dirname(package_dir), "bin"),
    ]


def _user_scripts() -> str | None:
    if sys.version_info >= (3, 10):
        scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        scheme = "nt_user"
    elif sys.platform == "darwin" and getattr(sys, "_framework", None):
        scheme = "osx_framework_user"
    else:
        scheme = "posix_user"
    try:
        return sysconfig.get_path("scripts", scheme=scheme)
    except KeyError:
        return None


def _prefix_scripts(package_dir: str) -> str | None:
    """``P/bin`` (``P\\Scripts`` on Windows) when the package sits in a ``site-packages`` of P."""
    parts = package_dir.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].lower() == "site-packages":
            # POSIX: P/lib/pythonX.Y/site-packages; Windows: P\Lib\site-packages.
            up = 2 if os.name == "nt" else 3
            if i - up + 1 <= 0:
                return None
            prefix = os.sep.join(parts[: i - up + 1])
            return os.path.join(prefix, "Scripts" if os.name == "nt" else "bin")
    return None
