"""Remote hosts over SSH (docs/hosts.md): a run's named hosts reached with asyncssh, a run directory
on each, the processes perflab starts there tracked by process group, their clocks measured against
this machine's, and their fingerprints.

target.py (user@address[:port], the ssh config) -> transport.py (connections, remote processes,
copies) -> rundir.py (the run's directory and processes on a host) -> clock.py, session.py (a run's
hosts); clean.py (what killed runs left, for `perflab doctor --clean`). place.py (a host as a place:
perflab/places/), server.py (a server there: `ServerHost`, and `HostStage`, the stage of a cell's
lifecycle there: run/stage.py), client.py (a client there: `ClientOnHost`, the window's client end),
dataset.py (a dataset prepared there): the SSH place's implementations of the seams the cell and the
window are written against (CellRunner.stage and client_end pick them by the cell's placement).
"""
