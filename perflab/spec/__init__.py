"""Experiment file (TOML) -> validated Experiment -> list of Cells (the matrix).

Input: a TOML file as documented in docs/experiment.md. Every problem in it is collected
and raised at once as a SpecError (key path, expected, found, hint); nothing is started
before the whole file is valid.

    exp = load("examples/quick.toml"); cells = exp.cells()   # interleaved run order

    spec/fields.py    value types and their validators, limits on hostile input
    spec/schema.py    the file and its sections (pydantic models)
    spec/variant.py   a variant and the axes
    spec/observe.py   the [observe] section
    spec/matrix.py    Cell, Experiment: the matrix in run order
    spec/loading.py   load / parse: bytes -> TOML -> ExperimentFile -> Experiment
    spec/problems.py  validation errors -> Problems with key paths and hints
"""

from perflab.spec.fields import MAX_CELLS, MAX_DEPTH, MAX_FILE_BYTES, MAX_REPEATS
from perflab.spec.loading import load, parse
from perflab.spec.matrix import MAX_SEED, Cell, Experiment, block_order
from perflab.spec.observe import AllocObserve, ObserveSection, PerfObserve, PmpObserve
from perflab.spec.problems import problem
from perflab.spec.schema import DatasetSection, ExperimentFile, ExperimentSection, WorkloadSection
from perflab.spec.variant import Variant

__all__ = [
    "MAX_CELLS",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_REPEATS",
    "MAX_SEED",
    "AllocObserve",
    "Cell",
    "DatasetSection",
    "Experiment",
    "ExperimentFile",
    "ExperimentSection",
    "ObserveSection",
    "PerfObserve",
    "PmpObserve",
    "Variant",
    "WorkloadSection",
    "block_order",
    "load",
    "parse",
    "problem",
]
