"""Starting a child as a terminal would: SIGINT at its default, whatever this test process inherited.

Under `nohup ... &`, a script's background job or a CI runner, SIGINT comes ignored, and run_bench.py keeps an
ignored SIGINT ignored on purpose (tests/test_run_bench.py holds that case). A test that sends Ctrl-C to a child
passes `preexec_fn=sigint_at_default` so that the Ctrl-C it sends arrives wherever the tests were started.
"""
import signal


def sigint_at_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
