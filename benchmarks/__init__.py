"""Benchmarks for hive-brain: startup time, LoCoMo and CMRC retrieval quality.

Run everything with ``python -m benchmarks.run [--quick|--full]``; each benchmark also runs alone
(``python -m benchmarks.locomo --quick``). Results go to ``benchmarks/results/<name>.json``.
"""
