"""pytest plugin: assay's cases as pytest items.

``pytest --assay DIR`` runs ``assay run DIR --junit FILE`` once per project and session, at
collection, and turns what the binary reported into items:

* ``DIR::<bank>::<test_id>``: one item per bank case. It passes or fails as the case's verdict
  in assay's JUnit says (decided once, where assay scored the case: the same verdict the console,
  the reports and the web UI show), and a failing item's first line names the checks that
  failed it, then the reply's start (answer cases) or what was selected. A case that assay
  could not score (an infrastructure error) is a pytest *error*, apart from the failures.
* ``DIR::gate``: the quality gate, from the binary's exit code (0 passed, 1 failed). A failing
  gate shows what ``assay run`` printed: the comparison with the baseline, the regression
  gate's verdict and the summary.
* with ``--assay-simulate``: ``DIR::sim::<scenario>[<trial>]`` per simulation run and
  ``DIR::sim::gate``, from ``assay simulate DIR --json``.

A project that assay refuses (exit 2, bad input) or that infrastructure errors kept from any
verdict (exit 3 with no report) is a collection error carrying assay's stderr. The binary is
found by :func:`assay_eval.find_assay_bin`. Nothing here re-implements assay's rules: verdicts,
reasons and the gate all come from the binary. See docs/pytest.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

import pytest

#: What each exit code of ``assay run`` and ``assay simulate`` means (DESIGN.md).
EXIT_MEANING = {
    0: "passed",
    1: "the quality gate failed",
    2: "bad input or usage",
    3: "infrastructure errors kept cases from a verdict",
}

#: The words `assay run --help` uses for exit 1.
GATE_RULES = "CRITICAL health, below [gate] in assay.toml, or a regression rule broken"

BANKS = ("semantic", "state", "pattern", "always", "answer")

_STATE = pytest.StashKey["_Session"]()


# --- What the binary reported ------------------------------------------------------------------


@dataclasses.dataclass
class CaseOutcome:
    """One bank case as the binary's JUnit XML reported it."""

    bank: str
    test_id: str
    title: str
    #: ``passed``, ``failed`` or ``error``.
    status: str
    #: assay's message: the checks that failed the case, or the error.
    message: str = ""
    #: the body of a failure: each failed check, then the reply's start (answer cases) or what
    #: was selected, and the score, a line each.
    details: str = ""
    #: how long the case took, in seconds (JUnit's ``time``), when measured.
    seconds: float | None = None

    def failure_text(self) -> str:
        """The text pytest shows for a failing or erroring case: assay's own words."""
        # The first line is what pytest's short summary shows: the checks that failed the case.
        lines = [line.strip() for line in self.details.splitlines() if line.strip()]
        first = self.message or (lines[0] if lines else "")
        rest = [line for line in lines if line != first]
        case = f"{self.test_id}: {self.title}" if self.title else self.test_id
        return "\n".join([first, *rest, f"(case {case})"])


def parse_junit(text: str) -> list[CaseOutcome]:
    """Every case of ``assay run --junit`` output, in the file's order (bank by bank)."""
    root = ET.fromstring(text)
    cases = []
    for suite in root.iter("testsuite"):
        bank = suite.get("name", "")
        for case in suite.iter("testcase"):
            name = case.get("name", "")
            # assay writes `ID: title`, or the ID alone when the case has no title.
            test_id, sep, title = name.partition(": ")
            if not sep:
                test_id, title = name, ""
            failure = case.find("failure")
            error = case.find("error")
            time = case.get("time")
            seconds = float(time) if time else None
            if error is not None:
                outcome = CaseOutcome(bank, test_id, title, "error", error.get("message", ""))
            elif failure is not None:
                outcome = CaseOutcome(
                    bank,
                    test_id,
                    title,
                    "failed",
                    failure.get("message", ""),
                    (failure.text or "").strip(),
                )
            else:
                outcome = CaseOutcome(bank, test_id, title, "passed")
            outcome.seconds = seconds
            cases.append(outcome)
    return cases


@dataclasses.dataclass
class Invocation:
    """One run of the binary: its command line, exit code and output."""

    command: list[str]
    exit_code: int
    stdout: str
    stderr: str

    def meaning(self) -> str:
        return EXIT_MEANING.get(self.exit_code, "assay stopped abnormally")

    def shown(self) -> str:
        """The command line, without the scratch file the plugin reads (``--junit FILE``)."""
        words = ["assay", *self.command[1:]]
        if "--junit" in words:
            at = words.index("--junit")
            del words[at : at + 2]
        return shlex.join(words)

    def refusal(self) -> str:
        """The collection error for a run that gave no verdict at all."""
        stderr = self.stderr.strip() or "(nothing on stderr)"
        return (
            f"assay exited {self.exit_code} ({self.meaning()}) and reported no cases\n"
            f"  command: {self.shown()}\n{stderr}"
        )


@dataclasses.dataclass
class BankRun:
    """``assay run`` on one project: every case, and the gate from the exit code."""

    invocation: Invocation
    cases: list[CaseOutcome]

    def gate_status(self) -> str:
        return {0: "passed", 1: "failed"}.get(self.invocation.exit_code, "error")

    def gate_text(self) -> str:
        """Why the gate failed (or gave no verdict), in what ``assay run`` printed."""
        inv = self.invocation
        said = inv.stderr.strip().splitlines()
        verdicts = [line[len("ERROR ") :] for line in said if line.startswith("ERROR ")]
        rest = [line for line in said if not line.startswith("ERROR ")]
        if inv.exit_code == 1:
            # The first line is what pytest's short summary shows: assay's verdict when it
            # printed one (a broken regression rule), else what exit 1 means.
            head = [
                "; ".join(verdicts) or f"the quality gate failed ({GATE_RULES})",
                "assay run exited 1: the quality gate failed",
            ]
        else:
            errors = sum(1 for c in self.cases if c.status == "error")
            head = [
                f"no gate verdict: {errors} case(s) could not be scored "
                f"(assay run exited {inv.exit_code}: {inv.meaning()})",
                *verdicts,
            ]
        return _blocks("\n".join(head), console_summary(inv.stdout), "\n".join(rest))


def _blocks(*blocks: str) -> str:
    """The blocks that have text, a blank line between them."""
    return "\n\n".join(b for b in blocks if b.strip())


def console_summary(stdout: str) -> str:
    """The summary ``assay run`` printed, without what it says case by case (the items show
    it): from the failed cases by rule on."""
    lines = stdout.rstrip().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("failed: ", "cases below ", "failures:")):
            lines = lines[:i]
            break
    return "\n".join(lines).strip("\n")


@dataclasses.dataclass
class SimRunOutcome:
    """One simulation run (scenario × trial) from ``assay simulate --json``."""

    scenario_id: str
    repeat: int
    #: ``passed``, ``failed``, ``error`` or ``skipped`` (simulator at fault, uncertain).
    status: str
    text: str


def _score(value: Any) -> str:
    return "–" if value is None else f"{value:.1f}"


def sim_run_outcome(run: dict[str, Any], pass_threshold: Any) -> SimRunOutcome:
    """A run of the simulation report as a pytest outcome, worded as assay's reports word it."""
    verdict = run.get("verdict", "error")
    scenario = run.get("scenario_id", "?")
    repeat = int(run.get("repeat", 1))
    head = f"{scenario} #{repeat}: {run.get('scenario_name', '')}".rstrip(": ")
    judgement = run.get("judgement") or {}
    reason = run.get("reason") or ""
    if verdict == "pass":
        return SimRunOutcome(scenario, repeat, "passed", "")
    if verdict == "error":
        return SimRunOutcome(
            scenario, repeat, "error", f"ERROR: {run.get('error') or ''}\n(run {head})"
        )
    if verdict == "simulator_fault":
        issue = judgement.get("simulator_issue", "")
        return SimRunOutcome(
            scenario,
            repeat,
            "skipped",
            f"{scenario} #{repeat}: simulated user at fault (not counted): {issue}",
        )
    if verdict == "uncertain":
        return SimRunOutcome(
            scenario,
            repeat,
            "skipped",
            f"{scenario} #{repeat}: uncertain (the judge's samples disagree; not counted): "
            f"{reason}",
        )
    cause = run.get("failed_by")
    # The first line is what pytest's short summary shows: the verdict and why.
    judge = run.get("judge_verdict")
    why = []
    if reason:
        said = f" (the judge said {judge})" if cause == "check" and judge else ""
        why.append(f"{reason}{said}")
    why.append(f"overall {_score(run.get('overall'))}/10, pass threshold {_score(pass_threshold)}")
    lines = [f"FAIL ({cause or 'judge'}): {'; '.join(why)}", f"(run {head})"]
    if judgement.get("summary"):
        lines.append(f"Judge: {judgement['summary']}")
    scores = sorted(judgement.get("scores", []), key=lambda s: s.get("score", 0))
    for s in scores:
        lines.append(
            f"  {s.get('name', s.get('id', '?'))} {s.get('score', 0):.0f}/10: "
            f"{' '.join(str(s.get('reasoning', '')).split())}"
        )
    return SimRunOutcome(scenario, repeat, "failed", "\n".join(lines))


@dataclasses.dataclass
class SimRun:
    """``assay simulate`` on one project."""

    invocation: Invocation
    runs: list[SimRunOutcome]
    gate_lines: list[str]

    def gate_status(self) -> str:
        return {0: "passed", 1: "failed"}.get(self.invocation.exit_code, "error")

    def gate_text(self) -> str:
        """The gate's and the baseline's lines, as ``assay simulate`` words them."""
        inv = self.invocation
        if inv.exit_code == 1:
            # The first line is what pytest's short summary shows: the failed rule, if any.
            failed = [line for line in self.gate_lines if "FAILED" in line or "REGRESSED" in line]
            head = [
                *failed[:1],
                "assay simulate exited 1: a scored run failed, or the gate failed, "
                "or --baseline found a significant regression",
            ]
        else:
            errors = sum(1 for r in self.runs if r.status == "error")
            head = [
                f"no gate verdict: {errors} run(s) ended in an error "
                f"(assay simulate exited {inv.exit_code}: {inv.meaning()})"
            ]
        return _blocks("\n".join(head), "\n".join(self.gate_lines), inv.stderr.strip())


def parse_sim_report(report: dict[str, Any]) -> tuple[list[SimRunOutcome], list[str]]:
    """The runs and the gate's lines of a simulation report (``assay simulate --json``)."""
    threshold = report.get("pass_threshold")
    runs = [sim_run_outcome(r, threshold) for r in report.get("runs", [])]
    lines = []
    gate = report.get("gate")
    if gate:
        rule = (
            "gate (no `gate:` in the suite: every scored run must pass): "
            if gate.get("implicit")
            else "gate: "
        )
        reasons = gate.get("reasons") or []
        why = f" ({'; '.join(reasons)})" if reasons else ""
        lines.append(f"{rule}{'passed' if gate.get('passed') else 'FAILED'}{why}")
    baseline = report.get("baseline")
    if baseline:
        verdict = "no significant regression" if baseline.get("passed") else "REGRESSED"
        lines.append(f"compared with {baseline.get('label', 'the baseline')}: {verdict}")
        lines.extend(f"  {r}" for r in baseline.get("reasons") or [])
        warnings = (baseline.get("comparison") or {}).get("warnings") or []
        lines.extend(f"  warning: {w}" for w in warnings)
    return runs, lines


# --- Running the binary --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProjectSpec:
    """What to run on one project."""

    dir: Path
    args: tuple[str, ...] = ()
    baseline: str | None = None
    simulate: bool = False
    simulate_args: tuple[str, ...] = ()


class AssayRunError(Exception):
    """The binary gave no verdict (exit 2, or 3 with no report): a collection error."""


def _assay_bin() -> str:
    try:
        from assay_eval import find_assay_bin
    except ImportError as e:  # pragma: no cover - the package ships both modules
        raise AssayRunError(f"cannot import assay_eval.find_assay_bin: {e}") from e
    try:
        return find_assay_bin()
    except Exception as e:  # noqa: BLE001 - whatever it raises, the user needs its words
        raise AssayRunError(f"cannot find the assay binary: {e}") from e


def _invoke(command: list[str]) -> Invocation:
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    except OSError as e:
        raise AssayRunError(f"cannot start {command[0]}: {e}") from e
    return Invocation(command, done.returncode, done.stdout, done.stderr)


def run_banks(spec: ProjectSpec, scratch: Path) -> BankRun:
    """``assay run DIR --junit FILE [--baseline SPEC] ARGS``, its cases and its exit code."""
    fd, junit = tempfile.mkstemp(prefix="assay-", suffix=".xml", dir=scratch)
    os.close(fd)
    os.unlink(junit)
    command = [_assay_bin(), "run", str(spec.dir), "--junit", junit]
    if spec.baseline:
        command += ["--baseline", spec.baseline]
    command += list(spec.args)
    inv = _invoke(command)
    written = Path(junit)
    if inv.exit_code not in (0, 1, 3) or not written.is_file():
        raise AssayRunError(inv.refusal())
    try:
        cases = parse_junit(written.read_text(encoding="utf-8"))
    except ET.ParseError as e:
        raise AssayRunError(f"cannot read assay's JUnit XML {junit}: {e}") from e
    return BankRun(inv, cases)


def run_simulation(spec: ProjectSpec) -> SimRun:
    """``assay simulate DIR --json ARGS``, its runs and its gate."""
    command = [_assay_bin(), "simulate", str(spec.dir), "--json", *spec.simulate_args]
    inv = _invoke(command)
    report = None
    if inv.exit_code in (0, 1, 3):
        try:
            report = json.loads(inv.stdout)
        except ValueError:
            report = None
    if not isinstance(report, dict):
        raise AssayRunError(inv.refusal())
    runs, gate_lines = parse_sim_report(report)
    return SimRun(inv, runs, gate_lines)


class _Session:
    """Per pytest session: each project's runs (once each), the projects collected so far."""

    def __init__(self) -> None:
        self._scratch: Path | None = None
        self.bank_runs: dict[ProjectSpec, BankRun | AssayRunError] = {}
        self.sim_runs: dict[ProjectSpec, SimRun | AssayRunError] = {}
        self.collected: set[Path] = set()
        self.order: list[Invocation] = []

    @property
    def scratch(self) -> Path:
        """A folder for the binary's JUnit files, made when first needed."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="assay-pytest-"))
        return self._scratch

    def banks(self, spec: ProjectSpec) -> BankRun:
        if spec not in self.bank_runs:
            try:
                self.bank_runs[spec] = run_banks(spec, self.scratch)
                self.order.append(self.bank_runs[spec].invocation)
            except AssayRunError as e:
                self.bank_runs[spec] = e
        found = self.bank_runs[spec]
        if isinstance(found, AssayRunError):
            raise found
        return found

    def simulation(self, spec: ProjectSpec) -> SimRun:
        if spec not in self.sim_runs:
            try:
                self.sim_runs[spec] = run_simulation(spec)
                self.order.append(self.sim_runs[spec].invocation)
            except AssayRunError as e:
                self.sim_runs[spec] = e
        found = self.sim_runs[spec]
        if isinstance(found, AssayRunError):
            raise found
        return found

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


# --- pytest's side -------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "assay (test harness for LLM and RAG apps)")
    group.addoption(
        "--assay",
        action="append",
        dest="assay_dirs",
        default=[],
        metavar="DIR",
        help="collect the cases of the assay project DIR (repeatable); runs `assay run` once",
    )
    group.addoption(
        "--assay-baseline",
        dest="assay_baseline",
        default=None,
        metavar="SPEC",
        help="compare with a saved run (`accepted`, `latest`, a run id or a results JSON): "
        "passed to `assay run --baseline`; the DIR::gate item carries the verdict",
    )
    group.addoption(
        "--assay-args",
        dest="assay_args",
        default=None,
        metavar="ARGS",
        help='extra arguments for `assay run`, one string (e.g. "--banks state --no-save")',
    )
    group.addoption(
        "--assay-simulate",
        dest="assay_simulate",
        action="store_true",
        default=None,
        help="also run `assay simulate` on projects with sim/suite.yaml: one item per run",
    )
    group.addoption(
        "--assay-simulate-args",
        dest="assay_simulate_args",
        default=None,
        metavar="ARGS",
        help='extra arguments for `assay simulate`, one string (e.g. "--model openai/gpt-4o")',
    )
    parser.addini(
        "assay_projects",
        type="paths",
        default=[],
        help="assay project directories to collect (relative to the ini file)",
    )
    parser.addini("assay_args", default="", help="extra arguments for `assay run`")
    parser.addini("assay_baseline", default="", help="`--baseline` for `assay run`")
    parser.addini("assay_simulate", type="bool", default=False, help="also run `assay simulate`")
    parser.addini("assay_simulate_args", default="", help="extra arguments for `assay simulate`")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "assay_project(dir, *, args=None, baseline=None, simulate=None, simulate_args=None, "
        "name=None): collect the cases of an assay project under this test module "
        "(dir relative to the module's folder)",
    )
    config.addinivalue_line("markers", "assay: an item made from an assay case or gate")
    config.addinivalue_line("markers", "assay_gate: assay's quality gate of a project")
    config.stash[_STATE] = _Session()


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


def _args(text: str | None) -> tuple[str, ...]:
    return tuple(shlex.split(text)) if text else ()


def _session_defaults(config: pytest.Config) -> dict[str, Any]:
    opt = config.option
    simulate = opt.assay_simulate
    if simulate is None:
        simulate = bool(config.getini("assay_simulate"))
    return {
        "args": _args(
            opt.assay_args if opt.assay_args is not None else config.getini("assay_args")
        ),
        "baseline": opt.assay_baseline or config.getini("assay_baseline") or None,
        "simulate": simulate,
        "simulate_args": _args(
            opt.assay_simulate_args
            if opt.assay_simulate_args is not None
            else config.getini("assay_simulate_args")
        ),
    }


def _node_id(config: pytest.Config, path: Path, typed: str) -> str:
    """The project's path from pytest's root folder (its name when it is the root folder), or
    as typed when it lies outside."""
    try:
        relative = path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return typed.rstrip("/\\") or typed
    return path.name if relative in ("", ".") else relative


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Adds the projects: those of the command line and ini file under the session, those a
    module names with ``pytest.mark.assay_project`` under that module."""
    outcome = yield
    # Cheap for every other collector: the plugin is loaded in every session of an environment
    # where assay-eval is installed.
    if isinstance(collector, (pytest.Session, pytest.Module)):
        rep = outcome.get_result()
        if rep.outcome == "passed" and isinstance(rep.result, list):
            _add_projects(collector, rep.result)


def _add_projects(collector: pytest.Collector, result: list[Any]) -> None:
    config = collector.config
    state = config.stash[_STATE]
    if isinstance(collector, pytest.Session):
        defaults = _session_defaults(config)
        typed = [(d, config.invocation_params.dir / d) for d in config.option.assay_dirs]
        typed += [(str(p), Path(p)) for p in config.getini("assay_projects")]
        for text, path in typed:
            path = path.resolve()
            if path in state.collected:
                continue
            state.collected.add(path)
            spec = ProjectSpec(dir=path, **defaults)
            result.append(
                AssayProject.from_parent(
                    collector,
                    name=_node_id(config, path, text),
                    path=path,
                    nodeid=_node_id(config, path, text),
                    spec=spec,
                )
            )
    elif isinstance(collector, pytest.Module):
        for mark in collector.iter_markers("assay_project"):
            if not mark.args:
                result.append(_MarkerError.from_parent(collector, name="assay_project"))
                continue
            path = (collector.path.parent / str(mark.args[0])).resolve()
            if path in state.collected:
                continue
            state.collected.add(path)
            defaults = _session_defaults(config)
            kw = dict(mark.kwargs)
            spec = ProjectSpec(
                dir=path,
                args=_args(kw["args"]) if kw.get("args") is not None else defaults["args"],
                baseline=kw.get("baseline", defaults["baseline"]),
                simulate=(
                    bool(kw["simulate"]) if kw.get("simulate") is not None else defaults["simulate"]
                ),
                simulate_args=(
                    _args(kw["simulate_args"])
                    if kw.get("simulate_args") is not None
                    else defaults["simulate_args"]
                ),
            )
            result.append(
                AssayProject.from_parent(
                    collector, name=kw.get("name") or path.name, path=path, spec=spec
                )
            )


class _MarkerError(pytest.Collector):
    """A module's ``assay_project`` marker without a directory: a collection error."""

    def collect(self) -> Iterator[pytest.Item]:
        raise self.CollectError(
            "pytest.mark.assay_project needs the project directory, e.g. "
            'pytest.mark.assay_project("../my-project")'
        )


class AssayProject(pytest.Collector):
    """One assay project: its banks' cases, its gate and, when asked, its simulation."""

    def __init__(self, *, spec: ProjectSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.add_marker("assay")

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        state = self.config.stash[_STATE]
        spec = self.spec
        # A simulation-only project (sim/ and no test_banks/) runs no banks when simulating.
        banks = not (
            spec.simulate
            and not (spec.dir / "test_banks").exists()
            and (spec.dir / "sim" / "suite.yaml").is_file()
        )
        try:
            if banks:
                run = state.banks(spec)
                by_bank: dict[str, list[CaseOutcome]] = {}
                for case in run.cases:
                    by_bank.setdefault(case.bank, []).append(case)
                for bank in sorted(by_bank, key=lambda b: (BANKS + (b,)).index(b)):
                    yield AssayBank.from_parent(self, name=bank, cases=by_bank[bank])
                yield AssayGate.from_parent(self, name="gate", run=run)
            if spec.simulate and (spec.dir / "sim" / "suite.yaml").is_file():
                yield AssaySimulation.from_parent(self, name="sim", run=state.simulation(spec))
        except AssayRunError as e:
            raise self.CollectError(f"{spec.dir}: {e}") from e

    def reportinfo(self):
        return self.path, None, self.name


class AssayBank(pytest.Collector):
    """One bank's cases."""

    def __init__(self, *, cases: list[CaseOutcome], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cases = cases

    def collect(self) -> Iterator[pytest.Item]:
        seen: dict[str, int] = {}
        for case in self.cases:
            seen[case.test_id] = seen.get(case.test_id, 0) + 1
            # A bank that repeats an id still gets an item per case.
            name = (
                case.test_id if seen[case.test_id] == 1 else f"{case.test_id}[{seen[case.test_id]}]"
            )
            yield AssayCase.from_parent(self, name=name, case=case)


class _AssayItem(pytest.Item):
    def reportinfo(self):
        # The project's folder; a line, since pytest places a skip by its item's line.
        return self.path, 0, self.nodeid


class AssayCase(_AssayItem):
    """One bank case; its outcome is already known from assay's JUnit XML."""

    def __init__(self, *, case: CaseOutcome, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        if case.title:
            self.user_properties.append(("assay.title", case.title))
        if case.seconds is not None:
            # The case's own duration as assay measured it (the item itself takes no time).
            self.user_properties.append(("assay.time", f"{case.seconds:.3f}"))

    def setup(self) -> None:
        # An infrastructure error is a pytest error (at setup), kept apart from failures.
        if self.case.status == "error":
            pytest.fail(
                "assay could not score this case (infrastructure error):\n"
                + self.case.failure_text(),
                pytrace=False,
            )

    def runtest(self) -> None:
        if self.case.status == "failed":
            pytest.fail(self.case.failure_text(), pytrace=False)


class AssayGate(_AssayItem):
    """A gate: the exit code of ``assay run`` (a project's banks) or ``assay simulate`` (its
    simulation)."""

    def __init__(self, *, run: "BankRun | SimRun", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.add_marker("assay_gate")

    def setup(self) -> None:
        if self.run.gate_status() == "error":
            pytest.fail(self.run.gate_text(), pytrace=False)

    def runtest(self) -> None:
        if self.run.gate_status() == "failed":
            pytest.fail(self.run.gate_text(), pytrace=False)


class AssaySimulation(pytest.Collector):
    """A project's simulation: one item per scenario run, and the simulation's gate."""

    def __init__(self, *, run: SimRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> Iterator[pytest.Item]:
        for outcome in self.run.runs:
            yield AssaySimItem.from_parent(
                self, name=f"{outcome.scenario_id}[{outcome.repeat}]", outcome=outcome
            )
        yield AssayGate.from_parent(self, name="gate", run=self.run)


class AssaySimItem(_AssayItem):
    """One simulation run (scenario × trial)."""

    def __init__(self, *, outcome: SimRunOutcome, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outcome = outcome
        if outcome.status == "skipped":
            # As a mark, so that pytest reports the item, not this file, as where it skipped.
            self.add_marker(pytest.mark.skip(reason=outcome.text))

    def setup(self) -> None:
        if self.outcome.status == "error":
            pytest.fail(self.outcome.text, pytrace=False)

    def runtest(self) -> None:
        if self.outcome.status == "failed":
            pytest.fail(self.outcome.text, pytrace=False)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Each run of the binary in a line, with what it said on stderr (warnings)."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.order:
        return
    terminalreporter.section("assay")
    for inv in state.order:
        terminalreporter.write_line(f"{inv.shown()}: exit {inv.exit_code} ({inv.meaning()})")
        for line in inv.stderr.strip().splitlines()[:20]:
            terminalreporter.write_line(f"  {line}")
