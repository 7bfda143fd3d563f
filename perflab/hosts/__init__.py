"""Remote hosts over SSH (docs/hosts.md): a run's named hosts reached with asyncssh, a run directory
on each, the processes perflab starts there tracked by process group, their clocks measured against
this machine's, and their fingerprints.

target.py (user@address[:port], the ssh config) -> transport.py (connections, remote processes,
copies) -> rundir.py (the run's directory and processes on a host) -> clock.py, session.py (a run's
hosts); clean.py (what killed runs left, for `perflab doctor --clean`).
"""
