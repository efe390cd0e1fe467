"""The dreaming service's id checks take whole values only: a trailing newline is not an id."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidArgument
from services.dreaming.servicer import check_ids, check_run

RUN = "20261201T030000Z-1a2b3c"


def test_well_formed_ids_pass() -> None:
    assert check_run(RUN, "3") == (RUN, f"{RUN}/3")
    assert check_run(RUN, f"{RUN}/12") == (RUN, f"{RUN}/12")
    assert check_ids(["p-0123456789ab"]) == ["p-0123456789ab"]


@pytest.mark.parametrize(("run_id", "op_id"), [(RUN + "\n", ""), (RUN, "3\n"), (RUN, f"{RUN}/3\n")])
def test_a_trailing_newline_is_refused(run_id: str, op_id: str) -> None:
    with pytest.raises(InvalidArgument):
        check_run(run_id, op_id)


def test_a_proposal_id_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        check_ids(["p-0123456789ab\n"])
