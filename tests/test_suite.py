"""The suite's own scheduling: `make test` makes each shared smoke run once."""

import pytest
from conftest import DAG_FIXTURES


def test_every_dag_test_goes_to_the_one_worker_that_makes_the_smoke_runs(request):
    """Under `--dist loadgroup` xdist sends a test to a worker by the `@group` suffix of its node id. If the suffix is
    missing (a hook order or a pytest release that drops xdist's renaming), each worker makes its own smoke runs
    side by side and the suite runs twice as long: on a slower machine, past its limit."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not running under pytest-xdist's --dist loadgroup")
    dag_tests = [item for item in request.session.items if DAG_FIXTURES & set(item.fixturenames)]
    if not dag_tests:
        pytest.skip("no end-to-end test selected")
    ungrouped = [item.nodeid for item in dag_tests if not item.nodeid.endswith("@smoke_dag")]
    assert not ungrouped, f"{len(ungrouped)} of {len(dag_tests)} end-to-end tests have no xdist group: {ungrouped[:3]}"
