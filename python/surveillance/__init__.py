"""surveillance: the client for a video-surveillance cloud API, with a Rust core.

Reads sites, devices, cameras, reports and dwell-time events, and posts point-of-sale
transactions to the service's webhook. :class:`Emulator` runs the service locally.

>>> import surveillance as sv
>>> isinstance(sv.__version__, str)
True
"""

import logging as _logging

from . import errors, types
from ._core import __version__
from ._output import write_parquet
from ._scan import scan_events
from .aio import AsyncClient
from .client import Client, Cost, EventPlan, Limits
from .emulator import Emulator
from .errors import *  # noqa: F403 (the exceptions, as errors.__all__ lists them)
from .publish import Failure, PublishError, PublishInterrupted, PublishReport, validate
from .sync import SyncInterrupted, SyncResult
from .types import *  # noqa: F403 (the records and dicts, as types.__all__ lists them)

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Limits",
    "EventPlan",
    "Cost",
    "Emulator",
    "write_parquet",
    "scan_events",
    "SyncResult",
    "SyncInterrupted",
    "validate",
    "PublishReport",
    "Failure",
    "PublishError",
    "PublishInterrupted",
]
__all__ += errors.__all__
# The records and dicts the clients return, for annotations (surveillance.types).
__all__ += types.__all__

# A library's logger: its records go where the application configures logging, and nowhere
# (not to stderr through logging's last resort) where it does not.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())
