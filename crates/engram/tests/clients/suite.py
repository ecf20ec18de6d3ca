"""What every client suite uses: named steps, waiting for a condition, and expected errors."""

import time


def step(name):
    print(f"step: {name}", flush=True)


def eventually(what, check, limit=60.0):
    """Calls `check` until it returns something true (returned), failing after `limit` s."""
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def raises(status, call):
    """Runs `call`, which must fail with the client's API error of HTTP `status`; returns the
    error body."""
    try:
        call()
    except Exception as err:  # each client has its own ApiError class
        if not hasattr(err, "status_code"):
            raise
        assert err.status_code == status, (status, err.status_code, err.body)
        return err.body
    raise AssertionError(f"expected HTTP {status}")
