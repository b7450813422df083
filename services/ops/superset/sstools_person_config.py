# SS-Tools Agent acts in this Superset as the person who asked: append this file to
# superset_config.py, below two settings:
#
#   SSTOOLS_OPS_JWKS_URL = "http://sstools-ops:8000/.well-known/jwks.json"  # ops' public keys
#   SSTOOLS_ENV_ID = "prod"  # this Superset's id in ops' ENVIRONMENTS
#
# Ops then calls Superset's REST API with "Authorization: Bearer sstools-person.<token>": a JWT
# ops signs (EdDSA) for one person, for this environment alone (audience "superset:<id>"), for a
# minute. This hook checks it against ops' published keys and makes that person Superset's
# current user for the request, through FAB's API-key path (checked before FAB's own JWT), so
# Superset's roles, dataset access and row-level security decide what they see and change, and
# its log names them. The user must exist here, active, under exactly the same username (as it
# does when both sign in through one identity provider). Nothing else changes: a Bearer token
# without the prefix, a session cookie, an API key of FAB's own go on as before.
from typing import Any as _SstoolsAny

import jwt as _sstools_jwt
from flask import g as _sstools_g
from superset.security import SupersetSecurityManager as _SstoolsSupersetSecurityManager

_SSTOOLS_PERSON_PREFIX = "sstools-person."
# Read when Superset loads its configuration: a missing setting stops it there, by name.
_SSTOOLS_AUDIENCE = "superset:" + globals()["SSTOOLS_ENV_ID"]
_SSTOOLS_KEYS = _sstools_jwt.PyJWKClient(
    globals()["SSTOOLS_OPS_JWKS_URL"], cache_keys=True, lifespan=300, timeout=5
)
# Ops mints a person's token for a minute; a longer one was not made by ops for this purpose.
_SSTOOLS_LONGEST_LIFE_SECONDS = 120
_SSTOOLS_BASE_MANAGER = globals().get("CUSTOM_SECURITY_MANAGER") or _SstoolsSupersetSecurityManager


def _sstools_person(token: str) -> _SstoolsAny:
    """The claims of a valid person token for this environment; None for anything else."""
    try:
        key = _SSTOOLS_KEYS.get_signing_key_from_jwt(token)
        claims = _sstools_jwt.decode(
            token,
            key,
            algorithms=["EdDSA"],
            audience=_SSTOOLS_AUDIENCE,
            options={"require": ["exp", "iat", "sub", "aud", "typ"], "strict_aud": True},
        )
    except _sstools_jwt.PyJWTError:
        return None
    if claims["typ"] != "superset" or claims["exp"] - claims["iat"] > _SSTOOLS_LONGEST_LIFE_SECONDS:
        return None
    return claims


class SstoolsPersonSecurityManager(_SSTOOLS_BASE_MANAGER):  # type: ignore[misc, valid-type]
    def validate_api_key(self, api_key_string: str) -> _SstoolsAny:
        if not api_key_string.startswith(_SSTOOLS_PERSON_PREFIX):
            return super().validate_api_key(api_key_string)
        claims = _sstools_person(api_key_string[len(_SSTOOLS_PERSON_PREFIX) :])
        if claims is None:
            return None
        user = self.find_user(username=claims["sub"])
        # exactly this name: FAB matches usernames without regard to case by default, and
        # "Admin" in ops is not "admin" here
        if user is None or not user.is_active or user.username != claims["sub"]:
            return None
        _sstools_g.user = user
        _sstools_g._api_key_user = True
        return user


# FAB's own API keys keep working where they were on; nowhere else are they turned on.
_SSTOOLS_KEYS_BEFORE = (
    globals().get("FAB_API_KEY_PREFIXES", ["sst_"]) if globals().get("FAB_API_KEY_ENABLED") else []
)
CUSTOM_SECURITY_MANAGER = SstoolsPersonSecurityManager
FAB_API_KEY_ENABLED = True
FAB_API_KEY_PREFIXES = [*_SSTOOLS_KEYS_BEFORE, _SSTOOLS_PERSON_PREFIX]
