"""Errors perflab reports to users, with a hint, and the exit codes they map to.

Every error a user can cause or fix is a PerflabError subclass carrying a message (what
and where) and a hint (how to fix). They are caught only in cli/__init__.py; anything else is a bug
and shows a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

EXIT_OK = 0
EXIT_RUN_FAILED = 1  # the run happened but something in it failed
EXIT_USAGE = 2  # bad input: nothing was started
EXIT_ENVIRONMENT = 3  # this machine lacks something (a tool, a library, a permission, exclusivity)
EXIT_REGRESSION = 4  # `perflab compare --fail-on slower[:X]`: a comparison is slower beyond X
EXIT_INTERRUPTED = 130


class PerflabError(Exception):
    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Problem:
    """One problem found in an experiment file: where, what was expected, what was found."""

    path: str  # dotted key path, e.g. "variants.allocator.jemalloc.preload"
    expected: str
    found: str
    hint: str | None = None

    def render(self) -> str:
        text = f"{self.path}: expected {self.expected}, found {self.found}"
        return text + (f"\n    hint: {self.hint}" if self.hint else "")


def did_you_mean(word: str, known: Iterable[str], otherwise: str | None = None) -> str | None:
    """ "did you mean X, Y?" for the known names nearest a misspelled one (difflib), else `otherwise`."""
    import difflib

    close = difflib.get_close_matches(word, sorted(known), n=3)
    return f"did you mean {', '.join(close)}?" if close else otherwise


class SpecError(PerflabError):
    """The experiment file is invalid; carries every problem found, not just the first."""

    exit_code = EXIT_USAGE

    def __init__(self, source: str, problems: list[Problem]) -> None:
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        body = "\n".join("  " + p.render().replace("\n", "\n  ") for p in problems)
        super().__init__(f"{source}: {count}\n{body}", None)
        self.problems = problems


class UsageError(PerflabError):
    exit_code = EXIT_USAGE


class ToolMissingError(PerflabError):
    exit_code = EXIT_ENVIRONMENT


class EnvironmentProblem(SpecError):
    """The experiment file is fine, but this machine cannot run it (missing tools or
    libraries, no tmpfs, too few CPUs); carries every problem found."""

    exit_code = EXIT_ENVIRONMENT


class ResourceError(PerflabError):
    """The tmpfs or the results disk is full (or would be): the run stops, stored cells stay."""

    exit_code = EXIT_ENVIRONMENT


class ConcurrentRunError(PerflabError):
    """Another perflab run holds the machine."""

    exit_code = EXIT_ENVIRONMENT


class UnsafePathError(PerflabError):
    """A lock file or directory perflab would trust is a symlink, another account's, or writable by
    others (perflab/lockfile.py): refused, never followed."""

    exit_code = EXIT_ENVIRONMENT


class ServerStartError(PerflabError):
    """The server did not become ready: its own error lines are in the message."""


class ServerCrashedError(PerflabError):
    """The server exited while the workload ran."""


class ServerStopError(PerflabError):
    """A clean shutdown did not finish: what the server writes at exit (a snapshot's checkpoint,
    a PGO training run's profile) may be partial."""


class WorkloadError(PerflabError):
    """The benchmark client failed."""


class AllocatorNotMappedError(PerflabError):
    """The requested allocator library is not mapped into the server process."""


class RegressionError(PerflabError):
    """`perflab compare --fail-on`: a variant is slower than its baseline beyond the threshold."""

    exit_code = EXIT_REGRESSION


class ResultsFormatError(PerflabError):
    exit_code = EXIT_USAGE


class HostUnreachableError(PerflabError):
    """A remote host (docs/hosts.md) cannot be reached, or refuses our key."""

    exit_code = EXIT_ENVIRONMENT


class HostKeyError(PerflabError):
    """A remote host's key is not the one known_hosts has for it (or it has none): never accepted silently."""

    exit_code = EXIT_ENVIRONMENT


class HostLostError(PerflabError):
    """A remote host dropped off during the run: its cells fail with this cause, the run goes on."""


class ClockAlignmentError(PerflabError):
    """The hosts' clocks are known only within more than the allowed error: their series are not aligned."""
