"""``python -m gateway_cli``: the ``gateway`` command without the installed script.

``serve`` goes straight to ``gateway_cli.serve``, which imports only the service it runs, not every
command (``gateway up`` starts each child so: docs/operations.md "Memory at rest").
"""

import sys

if sys.argv[1:2] == ["serve"]:
    from gateway_cli.serve import main as serve

    sys.exit(serve(sys.argv[2:]))

from gateway_cli.cli import main

sys.exit(main())
