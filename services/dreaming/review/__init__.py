"""The reviewer: the transcripts it reads, the prompt, the reviewer process and its reply parsed
into proposals, and reviewers left behind by a dead process. Imports only ``model``, ``records`` and ``schedule``."""
