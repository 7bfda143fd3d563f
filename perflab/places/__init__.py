"""Where perflab's processes run: here (proc.py, proctree.py) or a host over SSH (perflab/hosts/)."""
