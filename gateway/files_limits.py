"""Size limits shared by the file API and the REST shim."""

from __future__ import annotations

MAX_CONTENT_BYTES = 1_048_576  # "1 MB" is 1,048,576 bytes of UTF-8 (docs/architecture.md "Limits and defaults")

# The largest JSON body that can still carry a 1 MB content: JSON escaping can
# turn one byte into six (``\u001f``), plus room for the other fields.
MAX_BODY_BYTES = 6 * MAX_CONTENT_BYTES + 64 * 1024
