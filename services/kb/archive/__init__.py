"""Every agent's archive in the KB process: refreshes, searches, recall recording and recall probes."""
