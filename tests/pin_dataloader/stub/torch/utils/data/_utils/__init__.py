MP_STATUS_CHECK_INTERVAL = 0.05  # before the submodules, which import it (as torch's)

from . import pin_memory, worker  # noqa: E402
