"""Scripted reviewer: hangs past any timeout, with a child process that hangs too.

Usage: python tests/reviewers/sleeper.py [--pidfile PATH] [SECONDS]

It starts a child (`python -c "import time; time.sleep(SECONDS)"`, same
process group, sharing stdout and stderr), writes "LEADER_PID CHILD_PID" to
PATH atomically (a temp file, then a rename) when --pidfile is given, and
sleeps SECONDS (default 60) itself. Only a kill of the whole process group
ends both before then, and only then does stdout reach EOF.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    pidfile = ""
    if len(argv) >= 2 and argv[0] == "--pidfile":
        pidfile, argv = argv[1], argv[2:]
    seconds = float(argv[0]) if argv else 60.0
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds!r})"])
    if pidfile:
        temp = pidfile + ".tmp"
        with open(temp, "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()} {child.pid}\n")
        os.replace(temp, pidfile)
    time.sleep(seconds)
    child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
