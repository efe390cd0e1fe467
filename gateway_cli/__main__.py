"""``python -m gateway_cli``: the ``gateway`` command without the installed script."""

import sys

from gateway_cli.cli import main

sys.exit(main())
