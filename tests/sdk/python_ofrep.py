"""Drives OpenFeature's OFREP provider for Python (openfeature-provider-ofrep, pinned in
requirements.txt) against a running Flagpole, for tests/it/frontend_sdks.rs.

Usage: python python_ofrep.py BASE_URL TOKEN

Expects the toggles of tests/it/frontend_sdks.rs. Prints one JSON line with what the
OpenFeature client answered.
"""

import json
import sys

from openfeature import api
from openfeature.contrib.provider.ofrep import OFREPProvider
from openfeature.evaluation_context import EvaluationContext


def main() -> None:
    base, token = sys.argv[1], sys.argv[2]
    api.set_provider(
        OFREPProvider(base, headers_factory=lambda: {"Authorization": f"Bearer {token}"})
    )
    client = api.get_client()
    missing = client.get_boolean_details("sdk.missing", True)
    details = client.get_boolean_details("sdk.on", False)
    print(
        json.dumps(
            {
                "on": client.get_boolean_value("sdk.on", False),
                "off": client.get_boolean_value("sdk.off", True),
                "userU1": client.get_boolean_value(
                    "sdk.user", False, EvaluationContext(targeting_key="u1")
                ),
                "userU2": client.get_boolean_value(
                    "sdk.user", True, EvaluationContext(targeting_key="u2")
                ),
                "payload": client.get_string_value("sdk.payload", "default"),
                "reason": str(details.reason),
                "variant": details.variant,
                "missingValue": missing.value,
                "missingError": str(missing.error_code),
            }
        )
    )


if __name__ == "__main__":
    main()
