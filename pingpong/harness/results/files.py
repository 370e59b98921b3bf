"""A run's files: where they go, its JSON record rewritten atomically after every round, resumed after an
interruption. The reports beside it are written by report/exporters.py (save), from the same paths."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pingpong.harness.analysis.host_pace import sentinel_classes
from pingpong.harness.results.records import RunResult, load, recorded_setting, write_atomically
from pingpong.harness.results.stored import is_compressed, stored_path
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.usage import UsageError

DEFAULT_RESULTS_DIR = PROJECT_ROOT / "results"
# The configuration keys that shape the figures: a resumed run must not change any of them.
RESUME_KEYS = ("duration_s", "warmup_s", "repeat", "loop", "compression", "payload_size", "payload_kind", "pin",
               "servers", "clients", "python_packages", "node_packages", "pairs", "workload", "tls",
               "client_processes", "load_per_worker")


def prepare_results_dir(results_dir: Path) -> None:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe = results_dir / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"results folder {results_dir} is not writable: {exc.strerror}") from None


SAVED_FORMATS = ("json", "md", "csv", "html")  # the files of a run: <stamp>.<format>, and latest.<format>
FORMATS = ("terminal", "md", "csv", "json", "html")  # what `run --format` and `report --format` print


@dataclass(frozen=True)
class ResultPaths:
    """Where a run's files go: <stamp>.json (the record), .md, .csv and .html beside it, and latest.* copies."""

    json: Path
    latest_dir: Path  # the results folder (a resumed file may live elsewhere)

    @classmethod
    def for_run(cls, results_dir: Path, started_at: str, suffix: str = "") -> "ResultPaths":
        stamp = started_at.replace(":", "-").replace("+00-00", "Z") + suffix
        return cls(results_dir / f"{stamp}.json", results_dir)

    @property
    def markdown(self) -> Path:
        return self.json.with_suffix(".md")

    @property
    def html(self) -> Path:
        return self.json.with_suffix(".html")

    @property
    def latest_markdown(self) -> Path:
        return self.latest_dir / "latest.md"

    def files(self) -> list[Path]:
        """Every file exporters.save() writes, the run's own first."""
        return [self.json.with_suffix(f".{kind}") for kind in SAVED_FORMATS] + \
            [self.latest_dir / f"latest.{kind}" for kind in SAVED_FORMATS]


def save_record(result: RunResult, paths: ResultPaths) -> None:
    """Rewrite only the run's own JSON, without summaries: cheap enough to call after every round (the
    summaries, reports and latest.* copies are written by exporters.save(), at the end and on an interruption).
    Without indentation: json's C encoder does not indent, and takes a fifth of the time."""
    text = json.dumps(result.to_dict(None))
    write_atomically(paths.json, text)
    write_atomically(paths.latest_dir / "latest.json", text)


def resume(path: Path, fresh: RunResult, results_dir: Path,
           sentinel_class: str | None = None) -> tuple[RunResult, ResultPaths]:
    """The saved run to continue, after checking this command asks for the same configuration. sentinel_class: the
    class this host's sentinel would pace the new rounds in (analysis/host_pace.py), checked against the saved
    rounds'."""
    stored = stored_path(path)
    if is_compressed(stored):  # the run's own file is rewritten after every round, as plain JSON
        raise UsageError(f"--resume: {stored} is compressed; a run continues in a plain .json file (decompress it "
                         f"first: xz -dk {stored})")
    try:
        saved = load(path)
    except FileNotFoundError:
        raise UsageError(f"--resume: {path} does not exist") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--resume: {path} is not a results file of this suite ({exc})") from None
    differences = [f"{key} {recorded_setting(saved, key)!r} (this command: {recorded_setting(fresh, key)!r})"
                   for key in RESUME_KEYS if recorded_setting(saved, key) != recorded_setting(fresh, key)]
    switches = [(run.environment or {}).get("measurement_switches") or {} for run in (saved, fresh)]
    if switches[0] != switches[1]:  # e.g. rounds with the in-window pace and rounds measured raw
        differences.append(f"measurement switches {switches[0]!r} (this command: {switches[1]!r})")
    if any(attempt.ok and attempt.host_pace is None for cell in saved.cells for attempt in cell.attempts):
        differences.append("its windows were measured before the host's pace was (their rates are raw, the new "
                           "rounds' at the reference pace)")
    saved_classes = sentinel_classes(saved)
    if sentinel_class and saved_classes and saved_classes != {sentinel_class}:
        differences.append(f"its windows were paced by the host sentinel in the {' and '.join(sorted(saved_classes))} "
                           f"class, the new rounds' would be in the {sentinel_class} one, whose scales differ by "
                           "about 15%")
    if differences:
        raise UsageError(f"--resume: {path.name} was measured with other settings: {'; '.join(differences)}; "
                         f"repeat its original options")
    saved.interrupted = False
    saved.finished_at = None
    saved.command_line = saved.command_line + ["# resumed:"] + fresh.command_line[1:]
    return saved, ResultPaths(path, results_dir)

