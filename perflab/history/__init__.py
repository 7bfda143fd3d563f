"""History: every run of an experiment over time, its change points and their causes, a gate.

    record.py      a results directory -> RunRecord (provenance, an estimate per variant x threads)
    provenance.py  what a run ran: packages, build hashes, git commits, the host's fingerprint
    index.py       the index those records live in: SQLite (default) or a PostgreSQL database
    series.py      one experiment's runs as series per workload x variant x threads x metric
    changes.py     change points that weigh each run by its own uncertainty (docs/history.md)
    gate.py        `--fail-on`: does the newest run start a regression?
    html.py        the offline history page

Imports flow forward: history reads results through store/ and analyze/, never run/.
"""
