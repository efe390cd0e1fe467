"""Every agent's archive in the KB process: refreshes, searches, recall recording and recall probes.

It imports ``index``, ``resources``, and of the top floor ``file_watch`` and ``metrics``: never ``vault``,
``graph``, the servicer or main.
"""
