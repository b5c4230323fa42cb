import pytest


@pytest.fixture
def one_thread():
    """One torch thread: on a busy 2-core box two threads are several times slower for this tiny
    model (the CLI's --torch-threads sets it process-wide, so restore it afterwards)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
