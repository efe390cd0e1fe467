"""What every bench shares: the temporary home, free ports, child processes, percentiles, the tables
and PASS/FAIL lines, and the documentation page. Each ``bench/*.py`` keeps only its cases and goals.

A bench runs as ``python bench/<name>.py`` (``bench/`` is then first on ``sys.path``, so ``harness``
and the sibling benches import by name). Importing this package puts the checkout it belongs to
first on ``sys.path`` too, so ``gateway`` and ``services`` come from this tree and not from another
checkout an editable install may point at: import ``harness`` before them.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO = BENCH_DIR.parent

for _path in (str(REPO), str(BENCH_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
