"""What Airflow's providers manager reads of the package, through the ``apache_airflow_provider``
entry point: apart from :mod:`surveillance.airflow`, which imports Airflow's classes, since
Airflow loads its providers' entry points while it is itself being imported (an entry point in
that module made ``import airflow`` fail on a circular import once the package was installed).
It imports nothing of Airflow."""

from __future__ import annotations

from typing import Any

from ._core import __version__

#: The provider's connection type, and its name in Airflow's UI.
CONN_TYPE = "surveillance"
HOOK_NAME = "Surveillance"


def get_provider_info() -> dict[str, Any]:
    """What Airflow's providers manager reads of this package (the ``apache_airflow_provider``
    entry point): its name, version and the connection type ``surveillance``.

    >>> [t["hook-class-name"] for t in get_provider_info()["connection-types"]]
    ['surveillance.airflow.SurveillanceHook']
    """
    return {
        "package-name": "surveillance",
        "name": "Surveillance",
        "description": "The video-surveillance cloud API: its events synced to Parquet, "
        "records published to its webhook",
        "versions": [__version__],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": "surveillance.airflow.SurveillanceHook",
                "hook-name": HOOK_NAME,
            }
        ],
        "integrations": [
            {
                "integration-name": "Surveillance",
                "tags": ["service"],
            }
        ],
        "operators": [
            {
                "integration-name": "Surveillance",
                "python-modules": ["surveillance.airflow"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Surveillance",
                "python-modules": ["surveillance.airflow"],
            }
        ],
    }
