"""A Python function as the product under test: the worker protocol.

``python -m assay_eval.worker pkg.module:function [--path DIR]...`` imports ``pkg.module``
once and answers assay's requests with ``function``, one at a time, for as long as assay keeps
its standard input open. assay starts it for a project whose ``[answer]`` target is a Python
function (see docs/python-worker.md) and runs several workers when cases run concurrently.

The protocol is JSON lines over stdio:

* assay writes one request per line on the worker's stdin: the product's request (``question``,
  ``prompts``, ``files``, and for answer cases ``user_state`` and ``context``) plus an integer
  ``id``. A request with ``"dry_run": true`` is answered ``{"id", "prompt_sha256": {agent:
  hex}}`` without calling the function.
* the worker writes one reply per line on stdout: ``{"id", "final_answer"}`` with, when the
  function says, ``contexts``, ``tool_calls`` and ``trace``; or ``{"id", "error"}`` when the
  function raised or returned something that is not a reply (an error in assay, not a failed
  case).

The function receives, as keyword arguments, those of ``question``, ``context``, ``user_state``,
``prompts`` and ``files`` that its signature names (all of them when it takes ``**kwargs``).
It may be ``async def``: one event loop serves the whole life of the worker.

The protocol owns the real stdout: before the module is imported, file descriptor 1 and
``sys.stdout`` are pointed at stderr, so a ``print()`` (or a C library writing to stdout)
lands in assay's log instead of corrupting a reply. Standard input is taken the same way.

Exit codes: 0 when assay closes stdin, 2 for a bad function spec, a module that cannot be
imported, a function that cannot be called this way or a malformed request line, 130 on
Ctrl-C.

assay embeds this file and runs it as ``python3 -c <this source> pkg.module:function``, so it
imports nothing outside the standard library and runs on Python 3.8 and later.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import inspect
import json
import os
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

#: What a function may take, in the order positional-only parameters receive them.
ARGUMENTS = ("question", "context", "user_state", "prompts", "files")
POSITIONAL_ORDER = ("question", "context", "user_state", "prompts")

#: The keys of a returned dict that hold the answer, in the order they are looked for.
ANSWER_KEYS = ("final_answer", "answer", "reply")

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

PROG = "python -m assay_eval.worker"


class StartupError(Exception):
    """The worker cannot serve: a bad spec, an import that failed, a function it cannot call."""


class BadRequest(Exception):
    """A request line the worker cannot read: not JSON, not an object, no integer ``id``."""


class BadReturn(Exception):
    """The function returned something that is not a reply."""


# --- Loading the function ----------------------------------------------------------------------


def parse_spec(spec: str) -> Tuple[str, str]:
    """``pkg.module:function`` as ``("pkg.module", "function")``; the function part may be a
    dotted path (``module:Class.method``, ``module:app.answer``)."""
    module, sep, attr = spec.partition(":")
    parts_ok = sep and all(p.isidentifier() for p in module.split(".") + attr.split("."))
    if not parts_ok:
        raise StartupError(
            f"{spec!r} is not a function spec: write it as pkg.module:function "
            f"(a module to import, a colon, then the function's name in it)"
        )
    return module, attr


def load_function(spec: str) -> Callable[..., Any]:
    """Imports the module of ``spec`` and returns its function, or raises
    :class:`StartupError` naming the spec and the cause."""
    module_name, attr = parse_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any error at import stops the worker, with its words
        detail = "" if isinstance(e, ModuleNotFoundError) else "\n" + traceback.format_exc()
        raise StartupError(
            f"{spec}: cannot import {module_name}: {type(e).__name__}: {e} "
            f"(sys.path starts with {sys.path[:3]}){detail}"
        ) from e
    target: Any = module
    names = attr.split(".")
    for i, name in enumerate(names):
        try:
            target = getattr(target, name)
        except AttributeError as e:
            owner = module_name if i == 0 else f"{module_name}:{'.'.join(names[:i])}"
            raise StartupError(f"{spec}: {owner} has no attribute {name!r}") from e
    if not callable(target):
        raise StartupError(
            f"{spec}: is {type(target).__name__} {_short(repr(target))}, not a function"
        )
    return target


class Caller:
    """Calls the function with the arguments its signature asks for."""

    def __init__(self, spec: str, function: Callable[..., Any]) -> None:
        self.spec = spec
        self.function = function
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError) as e:
            raise StartupError(
                f"{spec}: cannot read the function's signature ({e}); wrap it in a def that "
                f"takes question (and context, user_state, prompts or files as needed)"
            ) from e
        #: The names passed by position, in order.
        self.positional: List[str] = []
        #: The names passed by keyword.
        self.keywords: List[str] = []
        takes_all = False
        for parameter in signature.parameters.values():
            kind = parameter.kind
            required = parameter.default is inspect.Parameter.empty
            if kind is inspect.Parameter.VAR_KEYWORD:
                takes_all = True
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                continue
            elif kind is inspect.Parameter.POSITIONAL_ONLY:
                at = len(self.positional)
                if at < len(POSITIONAL_ORDER):
                    self.positional.append(POSITIONAL_ORDER[at])
                elif required:
                    raise StartupError(
                        f"{spec}: positional-only parameter {parameter.name!r} has nothing to "
                        f"receive: positional-only parameters get, in order, "
                        f"{', '.join(POSITIONAL_ORDER)}"
                    )
            elif parameter.name in ARGUMENTS:
                self.keywords.append(parameter.name)
            elif required:
                raise StartupError(
                    f"{spec}: parameter {parameter.name!r} is not one the worker passes and "
                    f"has no default; the function may take {', '.join(ARGUMENTS)} "
                    f"(or **kwargs for all of them)"
                )
        if takes_all:
            given = set(self.positional) | set(self.keywords)
            self.keywords += [name for name in ARGUMENTS if name not in given]

    def __call__(self, loop: asyncio.AbstractEventLoop, request: Dict[str, Any]) -> Any:
        values = arguments(request)
        result = self.function(
            *[values[n] for n in self.positional], **{n: values[n] for n in self.keywords}
        )
        if inspect.isawaitable(result):
            result = loop.run_until_complete(_awaited(result))
        return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def arguments(request: Dict[str, Any]) -> Dict[str, Any]:
    """What the function may receive, from a request (empty values for what it leaves out)."""
    return {
        "question": _or(request.get("question"), ""),
        "context": _or(request.get("context"), []),
        "user_state": _or(request.get("user_state"), {}),
        "prompts": _or(request.get("prompts"), {}),
        "files": _or(request.get("files"), []),
    }


def _or(value: Any, empty: Any) -> Any:
    return empty if value is None else value


# --- Requests and replies ----------------------------------------------------------------------


def parse_request(line: str) -> Dict[str, Any]:
    """A request line as a dict with an integer ``id``, or :class:`BadRequest`."""
    try:
        request = json.loads(line)
    except ValueError as e:
        raise BadRequest(f"a request line is not JSON ({e}): {_short(line)}") from e
    if not isinstance(request, dict):
        raise BadRequest(f"a request line is not a JSON object: {_short(line)}")
    request_id = request.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise BadRequest(f"a request has no integer \"id\": {_short(line)}")
    return request


def dry_run_reply(request: Dict[str, Any]) -> Dict[str, Any]:
    """The reply to a dry run: each prompt's SHA-256 (hex, of its UTF-8 text)."""
    prompts = request.get("prompts") or {}
    return {
        "id": request["id"],
        "prompt_sha256": {
            agent: hashlib.sha256(str(text).encode("utf-8")).hexdigest()
            for agent, text in prompts.items()
        },
    }


def reply_from(value: Any) -> Dict[str, Any]:
    """The reply fields of what the function returned, or :class:`BadReturn` saying what was
    returned and what is expected."""
    if isinstance(value, str):
        return {"final_answer": value}
    if not isinstance(value, dict):
        raise BadReturn(
            f"the function returned {_described(value)}; expected a str (the answer) or a "
            f"dict with \"final_answer\" and optionally \"contexts\", \"tool_calls\", \"trace\""
        )
    key = next((k for k in ANSWER_KEYS if k in value), None)
    if key is None:
        raise BadReturn(
            f"the function returned a dict without \"final_answer\" (keys: "
            f"{', '.join(sorted(map(str, value))) or 'none'}); expected \"final_answer\" "
            f"(or \"answer\" or \"reply\") holding the answer as a str"
        )
    answer = value[key]
    if not isinstance(answer, str):
        raise BadReturn(
            f"the function returned a dict whose {key!r} is {_described(answer)}; "
            f"expected a str"
        )
    reply: Dict[str, Any] = {"final_answer": answer}
    contexts = value.get("contexts")
    if contexts is not None:
        reply["contexts"] = _contexts(contexts)
    for name in ("tool_calls", "trace"):
        items = value.get(name)
        if items is None:
            continue
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, dict) for i in items):
            raise BadReturn(
                f"the function returned {name!r} as {_described(items)}; expected a list of "
                f"objects"
            )
        reply[name] = list(items)
    return reply


def _contexts(contexts: Any) -> List[Dict[str, Any]]:
    if not isinstance(contexts, (list, tuple)):
        raise BadReturn(
            f"the function returned 'contexts' as {_described(contexts)}; expected a list of "
            f"str or of {{\"entity\"?, \"text\"}} objects"
        )
    normalised = []
    for i, c in enumerate(contexts):
        if isinstance(c, str):
            normalised.append({"text": c})
        elif isinstance(c, dict) and isinstance(c.get("text"), str):
            normalised.append(c)
        else:
            raise BadReturn(
                f"the function returned contexts[{i}] as {_described(c)}; expected a str or "
                f"a {{\"entity\"?, \"text\"}} object"
            )
    return normalised


def error_text(error: BaseException) -> str:
    """An exception's type and message, then its traceback (from the function's own frames:
    the worker's and the event loop's calls into it are left out)."""
    head = f"{type(error).__name__}: {error}".rstrip(": ")
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None and _plumbing(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    trace = "".join(traceback.format_exception(type(error), error, tb))
    return f"{head}\n\n{trace.rstrip()}"


def _plumbing(filename: str) -> bool:
    """Whether a frame of this file is the worker's or the event loop's."""
    return filename == _THIS_FILE or os.path.dirname(filename) == _ASYNCIO_DIR


_THIS_FILE = error_text.__code__.co_filename
_ASYNCIO_DIR = os.path.dirname(asyncio.__file__)


def _described(value: Any) -> str:
    if value is None:
        return "None"
    return f"{type(value).__name__} {_short(repr(value))}"


def _short(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


# --- Serving -----------------------------------------------------------------------------------


def take_stdio() -> Tuple[Any, Any]:
    """The protocol's own copies of stdin and stdout; fd 1 and ``sys.stdout`` then point at
    stderr, fd 0 and ``sys.stdin`` at the null device, so the function cannot touch either."""
    sys.stdout.flush()
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - kept for the worker's life
    return requests, replies


def serve(requests: Any, replies: Any, caller: Caller, loop: asyncio.AbstractEventLoop) -> int:
    """Answers request lines until EOF (0) or a malformed line (2)."""
    while True:
        line = requests.readline()
        if not line:
            return 0
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            request = parse_request(text)
        except BadRequest as e:
            _say(f"{e}; the worker stops (assay starts another)")
            return EXIT_USAGE
        if request.get("dry_run") is True:
            reply = dry_run_reply(request)
        else:
            reply = answer(caller, loop, request)
        try:
            encoded = json.dumps(reply, default=str)
        except (TypeError, ValueError) as e:
            encoded = json.dumps({"id": request["id"], "error": f"the reply is not JSON: {e}"})
        try:
            replies.write(encoded.encode("utf-8") + b"\n")
            replies.flush()
        except BrokenPipeError:
            # assay is gone: nobody to answer.
            return 0


def answer(
    caller: Caller, loop: asyncio.AbstractEventLoop, request: Dict[str, Any]
) -> Dict[str, Any]:
    """Calls the function on one request: its reply, or an error reply."""
    try:
        value = caller(loop, request)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the function's error is the case's
        return {"id": request["id"], "error": error_text(e)}
    try:
        fields = reply_from(value)
    except BadReturn as e:
        return {"id": request["id"], "error": str(e)}
    return {"id": request["id"], **fields}


def _say(message: str) -> None:
    sys.stderr.write(f"assay worker: {message}\n")
    sys.stderr.flush()


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serve assay's requests with a Python function (JSON lines over stdio).",
    )
    parser.add_argument("spec", metavar="pkg.module:function", help="the function to call")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR",
        help="put DIR on sys.path, after the current directory (repeatable)",
    )
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the worker; returns its exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        requests, replies = take_stdio()
        front = [os.getcwd()] + [os.path.abspath(p) for p in args.path]
        sys.path[:] = front + [p for p in sys.path if p not in front and p != ""]
        # Made before the import, so a client the module builds at import time finds it.
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            caller = Caller(args.spec, load_function(args.spec))
        except StartupError as e:
            _say(str(e))
            return EXIT_USAGE
        try:
            return serve(requests, replies, caller, loop)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
