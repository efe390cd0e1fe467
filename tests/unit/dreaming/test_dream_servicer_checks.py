"""The dreaming servicer's request checks: ids and run ids are refused clearly, never echoed at length."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidArgument
from services.dreaming.servicer import check_ids, check_run

RUN = "20261201T030000Z-1a2b3c"


def test_run_and_op_ids() -> None:
    assert check_run(RUN, "") == (RUN, None)
    assert check_run(RUN, "2") == (RUN, f"{RUN}/2")
    assert check_run(RUN, f"{RUN}/02") == (RUN, f"{RUN}/2")
    for run_id, op_id, field in [("", "", "is required"), ("../../etc", "", "not a run id"), (RUN, "x", "not an op"),
                                 (RUN, "20261201T030000Z-ffffff/1", "not an op"), (RUN, "1/2", "not an op")]:
        with pytest.raises(InvalidArgument, match=field):
            check_run(run_id, op_id)


def test_proposal_ids() -> None:
    assert check_ids(["p-0123456789ab"]) == ["p-0123456789ab"]
    with pytest.raises(InvalidArgument, match="is required"):
        check_ids([])
    with pytest.raises(InvalidArgument, match="at most 100"):
        check_ids(["p-0123456789ab"] * 101)
    with pytest.raises(InvalidArgument, match="at most 100 in one reject"):
        check_ids(["p-0123456789ab"] * 101, "reject")
    with pytest.raises(InvalidArgument, match="not a proposal id") as caught:
        check_ids(["p" * 5000])
    assert len(caught.value.message) < 200
