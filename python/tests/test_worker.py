"""The worker protocol (`assay_eval.worker`) against small product modules, in a subprocess run
both ways assay may start it: `python -m assay_eval.worker` and `python -c <source>` (the Rust
side embeds the file's source)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import assay_eval.worker as worker

PYTHON_DIR = Path(worker.__file__).resolve().parents[1]
SOURCE = Path(worker.__file__).read_text(encoding="utf-8")


class Worker:
    """Starts the worker on a module written to a folder, one way or the other."""

    def __init__(self, folder: Path, how: str) -> None:
        self.folder = folder
        self.how = how

    def module(self, text: str, name: str = "product") -> None:
        (self.folder / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")

    def command(self, *args: str) -> list[str]:
        if self.how == "module":
            return [sys.executable, "-m", "assay_eval.worker", *args]
        return [sys.executable, "-c", SOURCE, *args]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if self.how == "module":
            env["PYTHONPATH"] = str(PYTHON_DIR)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def run(self, *args: str, requests: list = (), raw: str = "") -> subprocess.CompletedProcess:
        """Sends the requests (dicts, then `raw`), closes stdin and waits for the worker."""
        stdin = "".join(json.dumps(r) + "\n" for r in requests) + raw
        return subprocess.run(
            self.command(*args),
            input=stdin.encode("utf-8"),
            capture_output=True,
            cwd=self.folder,
            env=self.env(),
            timeout=60,
            check=False,
        )

    def replies(self, *args: str, requests: list) -> list[dict]:
        done = self.run(*args, requests=requests)
        assert done.returncode == 0, done.stderr.decode()
        return [json.loads(line) for line in done.stdout.decode().splitlines()]


@pytest.fixture(params=["module", "source"])
def w(request: pytest.FixtureRequest, tmp_path: Path) -> Worker:
    return Worker(tmp_path, request.param)


def test_a_sync_function_answers_each_request_by_id(w):
    w.module(
        """
        def answer(question):
            return "you asked: " + question
        """
    )
    replies = w.replies(
        "product:answer",
        requests=[{"id": 7, "question": "Hi?", "prompts": {}, "files": []}, {"id": 8}],
    )
    assert replies == [
        {"id": 7, "final_answer": "you asked: Hi?"},
        {"id": 8, "final_answer": "you asked: "},
    ]


def test_an_async_function_runs_on_one_loop_for_the_workers_life(w):
    w.module(
        """
        import asyncio

        # A client built at import time keeps the loop it was made on.
        LOOP = asyncio.get_event_loop()
        seen = []

        async def answer(question, context):
            await asyncio.sleep(0)
            seen.append(asyncio.get_running_loop())
            same = all(loop is LOOP for loop in seen)
            return {"final_answer": f"{question} {len(context)} {len(seen)} {same}"}
        """
    )
    replies = w.replies(
        "product:answer",
        requests=[
            {"id": 1, "question": "a", "context": [{"text": "x"}]},
            {"id": 2, "question": "b"},
        ],
    )
    assert [r["final_answer"] for r in replies] == ["a 1 1 True", "b 0 2 True"]


def test_a_dict_reply_carries_contexts_tool_calls_and_trace(w):
    w.module(
        """
        def answer(question):
            return {
                "answer": "Paris",
                "contexts": ["France's capital is Paris.", {"entity": "geo", "text": "Europe"}],
                "tool_calls": [{"name": "search", "arguments": {"q": question}, "result": "ok"}],
                "trace": [{"agent": "writer", "output": "Paris"}],
            }
        """
    )
    [reply] = w.replies("product:answer", requests=[{"id": 3, "question": "Capital?"}])
    assert reply == {
        "id": 3,
        "final_answer": "Paris",
        "contexts": [{"text": "France's capital is Paris."}, {"entity": "geo", "text": "Europe"}],
        "tool_calls": [{"name": "search", "arguments": {"q": "Capital?"}, "result": "ok"}],
        "trace": [{"agent": "writer", "output": "Paris"}],
    }


def test_an_exception_is_an_error_reply_with_its_traceback_and_the_worker_goes_on(w):
    w.module(
        """
        def answer(question):
            if question == "bad":
                raise ValueError("the model is down")
            return "fine"
        """
    )
    first, second = w.replies(
        "product:answer", requests=[{"id": 1, "question": "bad"}, {"id": 2, "question": "ok"}]
    )
    assert first["id"] == 1 and "final_answer" not in first
    lines = first["error"].splitlines()
    assert lines[0] == "ValueError: the model is down"
    assert "Traceback (most recent call last):" in lines
    assert any("product.py" in line and "in answer" in line for line in lines)
    assert lines[-1] == "ValueError: the model is down"
    assert second == {"id": 2, "final_answer": "fine"}


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        ("None", "the function returned None; expected a str (the answer) or a dict"),
        ("42", "the function returned int 42; expected a str"),
        ("{'text': 'x'}", 'dict without "final_answer" (keys: text)'),
        ("{'final_answer': 3}", "dict whose 'final_answer' is int 3; expected a str"),
        ("{'final_answer': 'x', 'contexts': [1]}", "contexts[0] as int 1"),
    ],
)
def test_a_return_that_is_no_reply_is_an_error_reply_saying_what_is_expected(
    tmp_path, returned, words
):
    w = Worker(tmp_path, "source")
    w.module(f"def answer(question):\n    return {returned}\n")
    [reply] = w.replies("product:answer", requests=[{"id": 1, "question": "q"}])
    assert words in reply["error"]


def test_prints_and_writes_to_fd_1_do_not_reach_the_protocol(w):
    w.module(
        """
        import os, sys
        print("printed at import")

        def answer(question):
            print("printed in the function")
            sys.stdout.write("written to sys.stdout\\n")
            os.write(1, b"written to fd 1\\n")
            return "clean"
        """
    )
    done = w.run("product:answer", requests=[{"id": 1, "question": "q"}])
    assert done.returncode == 0
    assert done.stdout.decode().splitlines() == ['{"id": 1, "final_answer": "clean"}']
    stderr = done.stderr.decode()
    for words in ("printed at import", "printed in the function", "written to sys.stdout"):
        assert words in stderr
    assert "written to fd 1" in stderr


def test_a_dry_run_hashes_the_prompts_without_calling_the_function(w):
    w.module(
        """
        def answer(question, prompts):
            raise AssertionError("called on a dry run")
        """
    )
    prompts = {"writer": "assay-dry-run:writer:1f", "critic": "Prüfe: ünïcode"}
    [reply] = w.replies(
        "product:answer",
        requests=[{"id": 9, "dry_run": True, "prompts": prompts, "question": "", "files": []}],
    )
    assert reply == {
        "id": 9,
        "prompt_sha256": {
            agent: hashlib.sha256(text.encode("utf-8")).hexdigest()
            for agent, text in prompts.items()
        },
    }


def test_the_signature_chooses_the_arguments(w):
    w.module(
        """
        import json

        def named(question, user_state, files=None, tone="plain"):
            return json.dumps([question, user_state, files, tone])

        def positional(q, ctx, /):
            return json.dumps([q, ctx])

        def everything(**kwargs):
            return json.dumps(sorted(kwargs))

        def mixed(question, /, *, prompts, **rest):
            return json.dumps([question, prompts, sorted(rest)])

        class Bot:
            def reply(self, question):
                return "bot: " + question

        bot = Bot()
        """
    )
    request = {
        "id": 1,
        "question": "Q",
        "prompts": {"a": "P"},
        "files": [{"path": "f", "text": "t"}],
        "user_state": {"age": 9},
        "context": [{"entity": "e", "text": "c"}],
        "traceparent": "ignored: an unknown key",
    }
    answers = {
        spec: w.replies(spec, requests=[request])[0]["final_answer"]
        for spec in (
            "product:named",
            "product:positional",
            "product:everything",
            "product:mixed",
            "product:bot.reply",
        )
    }
    assert json.loads(answers["product:named"]) == [
        "Q",
        {"age": 9},
        [{"path": "f", "text": "t"}],
        "plain",
    ]
    assert json.loads(answers["product:positional"]) == ["Q", [{"entity": "e", "text": "c"}]]
    assert json.loads(answers["product:everything"]) == [
        "context",
        "files",
        "prompts",
        "question",
        "user_state",
    ]
    assert json.loads(answers["product:mixed"]) == [
        "Q",
        {"a": "P"},
        ["context", "files", "user_state"],
    ]
    assert answers["product:bot.reply"] == "bot: Q"


def test_absent_context_and_user_state_arrive_empty(w):
    w.module(
        """
        def answer(question, context, user_state, prompts, files):
            return repr((context, user_state, prompts, files))
        """
    )
    [reply] = w.replies("product:answer", requests=[{"id": 1, "question": "q"}])
    assert reply["final_answer"] == "([], {}, {}, [])"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("product", "'product' is not a function spec: write it as pkg.module:function"),
        ("product:answer:x", "is not a function spec"),
        ("missing_module:answer", "missing_module:answer: cannot import missing_module: "),
        ("product:nothing", "product:nothing: product has no attribute 'nothing'"),
        ("product:NUMBER", "product:NUMBER: is int 3, not a function"),
        ("product:needs", "product:needs: parameter 'mystery' is not one the worker passes"),
        ("broken:answer", "broken:answer: cannot import broken: RuntimeError: no key set"),
    ],
)
def test_a_function_that_cannot_serve_stops_the_worker_at_start_up(w, spec, words):
    w.module(
        """
        NUMBER = 3

        def answer(question):
            return question

        def needs(question, mystery):
            return question
        """
    )
    w.module("raise RuntimeError('no key set')\n", name="broken")
    done = w.run(spec)
    assert done.returncode == 2
    assert words in done.stderr.decode()
    assert done.stdout == b""


def test_path_puts_a_folder_on_sys_path(w):
    (w.folder / "src" / "app").mkdir(parents=True)
    (w.folder / "src" / "app" / "__init__.py").write_text("")
    (w.folder / "src" / "app" / "bot.py").write_text("def answer(question):\n    return 'ok'\n")
    assert w.run("app.bot:answer").returncode == 2, "not importable without --path"
    replies = w.replies("app.bot:answer", "--path", "src", requests=[{"id": 1}])
    assert replies == [{"id": 1, "final_answer": "ok"}]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("not json\n", "a request line is not JSON"),
        ('{"question": "q"}\n', 'a request has no integer "id"'),
        ('{"id": "7"}\n', 'a request has no integer "id"'),
        ("[1]\n", "a request line is not a JSON object"),
    ],
)
def test_a_malformed_request_line_stops_the_worker_with_exit_2(w, line, words):
    w.module("def answer(question):\n    return 'ok'\n")
    done = w.run("product:answer", requests=[{"id": 1, "question": "q"}], raw=line)
    assert done.returncode == 2
    # What came before was answered.
    assert done.stdout.decode().splitlines() == ['{"id": 1, "final_answer": "ok"}']
    assert words in done.stderr.decode()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is POSIX")
def test_ctrl_c_exits_quietly_with_130(w):
    w.module(
        """
        from pathlib import Path
        Path("ready").write_text("yes")

        def answer(question):
            return question
        """
    )
    process = subprocess.Popen(
        w.command("product:answer"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=w.folder,
        env=w.env(),
        # A parent that ignores SIGINT (a test harness may) would pass that on, and Python
        # then installs no KeyboardInterrupt handler: the worker gets the default back.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 30
    while not (w.folder / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert b"Traceback" not in stderr
    assert stdout == b""
