"""The KB process's bounded resources: open databases under a cap, the C heap, waits on worker threads."""
