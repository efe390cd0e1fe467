"""The KB process's bounded resources: open databases under a cap, the C heap, waits on worker threads.

It imports no other wing of the KB and nothing of its top floor: the wings that hold databases use it.
"""
