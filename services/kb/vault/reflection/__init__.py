"""The vault's weekly reflection, the KB's side (docs/concepts/vault.md "Weekly reflection"): ``plan``
claims a run and builds its clusters, ``merge`` checks and applies one merge, ``runs`` records, lists
and reverts runs, ``lines`` says what a merge keeps. Dreaming owns the schedule and the reviewer.
"""
