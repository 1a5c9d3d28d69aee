"""The suite's own scheduling: `make test` makes each shared smoke run once."""

import pytest
from conftest import DAG_FIXTURES, DAG_GROUPS


def test_every_dag_test_goes_to_the_worker_that_makes_its_run(request):
    """Under `--dist loadgroup` xdist sends a test to a worker by the `@group` suffix of its node id. If the suffix is
    missing (a hook order or a pytest release that drops xdist's renaming), each worker makes its own smoke runs
    side by side and the suite runs twice as long: on a slower machine, past its limit."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not running under pytest-xdist's --dist loadgroup")
    dag_tests = [item for item in request.session.items if DAG_FIXTURES & set(item.fixturenames)]
    if not dag_tests:
        pytest.skip("no end-to-end test selected")
    misplaced = [
        item.nodeid
        for item in dag_tests
        for name in DAG_FIXTURES & set(item.fixturenames)
        if not item.nodeid.endswith(f"@{DAG_GROUPS[name]}")
    ]
    assert not misplaced, f"{len(misplaced)} end-to-end tests are not in their run's xdist group: {misplaced[:3]}"
