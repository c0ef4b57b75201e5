import os

is_available_calls = [0]


def device_count():
    return 1 if os.environ.get("STUB_CUDA", "1") == "1" else 0


def is_available():
    """Counted: making a DataLoader must not ask it (it initialises the CUDA driver)."""
    is_available_calls[0] += 1
    return device_count() > 0


def current_device():
    return 0
