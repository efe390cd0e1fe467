"""``python -m gateway_cli.docs_reference [--check] [--out DIR]``: write the reference pages, or check them.

``--check`` writes nothing and exits 1 naming each stale page (what a test and a review need).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway_cli.docs_reference.pages import COMMAND, REFERENCE_DIR, stale, write


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check``, compare) every generated page; the exit status."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Generate docs/reference/ from the code.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="folder of the pages (default: docs/reference)")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.out)
        for name in names:
            print(f"stale: {args.out.name}/{name} (run {COMMAND})", file=sys.stderr)
        return 1 if names else 0
    for name in write(args.out):
        print(f"wrote {args.out.name}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
