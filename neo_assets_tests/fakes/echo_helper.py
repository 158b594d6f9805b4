"""A helper process for tests of ``neo_assets.concurrency.helper_process``: it echoes,
sleeps, raises, dies, or reads its environment on request."""

import os
import time
from typing import Any

from neo_assets.concurrency.helper_process import run_helper


def _handle(request: tuple[str, Any]) -> Any:
    verb, arg = request
    if verb == "sleep":
        time.sleep(arg)
        return "woke"
    if verb == "raise":
        raise RuntimeError(arg)
    if verb == "exit":
        os._exit(arg)
    if verb == "env":
        return os.environ.get(arg)
    return arg


if __name__ == "__main__":
    run_helper(_handle)
