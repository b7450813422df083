# SS-Tools Agent: this Superset signs people in through the company's OpenID Connect provider, so
# a person is one identity there, here, in the other Supersets and in the agent. Append this file to
# superset_config.py, below these settings and ABOVE sstools_person_config.py (whose hook then
# builds on this one):
#
#   SSTOOLS_OIDC_ISSUER = "https://sso.example.com"  # its discovery document is at
#                                                    # ISSUER/.well-known/openid-configuration
#   SSTOOLS_OIDC_CLIENT_ID = "superset-prod"  # this Superset's client at the provider
#   SSTOOLS_OIDC_CLIENT_SECRET = os.environ["SUPERSET_OIDC_SECRET"]
#   SSTOOLS_OIDC_PROVIDER_NAME = "sso"  # letters, digits, "-", "_", "."; the login page's button
#       # ("Sign in with Sso": Superset capitalises it) and the routes /login/sso and
#       # /oauth-authorized/sso, so the client's redirect URI is https://SUPERSET/oauth-authorized/sso
#   SSTOOLS_OIDC_ROLES_MAPPING = {"analysts": ["Alpha", "sql_lab"], "viewers": ["Gamma"]}
#   SSTOOLS_OIDC_USERNAME_CLAIM = "preferred_username"  # optional; the claim ops names people by
#   SSTOOLS_OIDC_GROUPS_CLAIM = "groups"  # optional
#
# It needs authlib (`pip install "authlib>=1.3,<2"`) beside Superset. The provider must offer the
# authorization-code flow with PKCE (S256), sign ID tokens with a key of its jwks_uri, and grant the
# scopes "openid profile email groups".
#
# Every sign-in then goes through the provider (AUTH_TYPE = AUTH_OAUTH; the password form is gone;
# FAB's /api/v1/security/login with "provider": "db" keeps working for accounts with a password,
# such as the service account ops signs in as: FAB gives whoever signs up through the provider a
# random one nobody knows). The username is the configured claim of the provider's signed ID token,
# exactly as given (ops acts here by that exact name); a user is made at the first sign-in and has,
# at every sign-in, exactly the roles SSTOOLS_OIDC_ROLES_MAPPING gives the person's groups. Someone
# whose groups map to no role is refused (no session), and a user of theirs made before keeps no
# role. A name that differs from an existing user's only by case is refused. The settings below
# replace any AUTH_TYPE, OAUTH_PROVIDERS, AUTH_ROLES_MAPPING, AUTH_ROLES_SYNC_AT_LOGIN,
# AUTH_USER_REGISTRATION(_ROLE) and AUTH_API_LOGIN_ALLOW_MULTIPLE_PROVIDERS set above.
# Superset's sign-out ends its own session alone: while the provider's lasts, signing in again
# comes straight back without a password.
import logging as _sstools_logging
import re as _sstools_re
from typing import Any as _SstoolsAny

from flask_appbuilder.security.manager import (  # type: ignore[import-not-found, unused-ignore]
    AUTH_OAUTH as _SSTOOLS_AUTH_OAUTH,
)
from flask_appbuilder.security.registerviews import (  # type: ignore[import-not-found, unused-ignore]
    RegisterUserOAuthView as _SstoolsRegisterUserOAuthView,
)
from superset.security import (  # type: ignore[import-not-found, unused-ignore]
    SupersetSecurityManager as _SstoolsSupersetSecurityManager,
)

_sstools_oidc_log = _sstools_logging.getLogger("sstools.oidc")


def _sstools_oidc_setting(name: str, default: _SstoolsAny = None) -> _SstoolsAny:
    """A setting from above; a missing required one stops Superset here, by name."""
    if name in globals():
        return globals()[name]
    if default is None:
        raise KeyError(f"{name} must be set above sstools_oidc_config.py")
    return default


def _sstools_oidc_text(name: str, default: str | None = None) -> str:
    value = _sstools_oidc_setting(name, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    return value.strip()


def _sstools_oidc_mapping(name: str) -> dict[str, list[str]]:
    value = _sstools_oidc_setting(name)
    if not isinstance(value, dict) or not all(
        isinstance(group, str)
        and isinstance(roles, list | tuple)
        and all(isinstance(role, str) and role for role in roles)
        for group, roles in value.items()
    ):
        raise ValueError(f"{name} must map each group to a list of Superset role names, not {value!r}")
    return {group: list(roles) for group, roles in value.items()}


# Read when Superset loads its configuration: a missing or malformed setting stops it there, by name.
_SSTOOLS_OIDC_ISSUER = _sstools_oidc_text("SSTOOLS_OIDC_ISSUER").rstrip("/")
if not _sstools_re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", _SSTOOLS_OIDC_ISSUER):
    raise ValueError(f"SSTOOLS_OIDC_ISSUER must be an http(s) URL, not {_SSTOOLS_OIDC_ISSUER!r}")
_SSTOOLS_OIDC_PROVIDER = _sstools_oidc_text("SSTOOLS_OIDC_PROVIDER_NAME")
if not _sstools_re.fullmatch(r"[A-Za-z0-9._-]+", _SSTOOLS_OIDC_PROVIDER):
    # It is a path segment of the routes and of the redirect URI registered at the provider.
    raise ValueError(
        "SSTOOLS_OIDC_PROVIDER_NAME may hold letters, digits, '-', '_' and '.' alone, "
        f"not {_SSTOOLS_OIDC_PROVIDER!r}"
    )
_SSTOOLS_OIDC_USERNAME_CLAIM = _sstools_oidc_text("SSTOOLS_OIDC_USERNAME_CLAIM", "preferred_username")
_SSTOOLS_OIDC_GROUPS_CLAIM = _sstools_oidc_text("SSTOOLS_OIDC_GROUPS_CLAIM", "groups")
_SSTOOLS_OIDC_ROLES_MAPPING = _sstools_oidc_mapping("SSTOOLS_OIDC_ROLES_MAPPING")
_SSTOOLS_BASE_MANAGER = globals().get("CUSTOM_SECURITY_MANAGER") or _SstoolsSupersetSecurityManager
# ab_user's first_name and last_name columns
_SSTOOLS_NAME_LENGTH = 64


def _sstools_oidc_names(claims: dict[str, _SstoolsAny], username: str) -> tuple[str, str]:
    given, family = claims.get("given_name"), claims.get("family_name")
    if isinstance(given, str) and given.strip():
        first, last = given.strip(), family.strip() if isinstance(family, str) else ""
    else:
        name = claims.get("name")
        parts = name.split(None, 1) if isinstance(name, str) else []
        first = parts[0] if parts else username
        last = parts[1].strip() if len(parts) > 1 else ""
    return first[:_SSTOOLS_NAME_LENGTH], last[:_SSTOOLS_NAME_LENGTH]


class _SstoolsNoFormRegistration(_SstoolsRegisterUserOAuthView):  # type: ignore[misc, valid-type, unused-ignore]
    """FAB's self-registration form, which AUTH_USER_REGISTRATION turns on beside the provider's
    sign-in, with no route: a user is made at a sign-in through the provider and nowhere else."""

    include_route_methods = frozenset[str]()


class SstoolsOidcSecurityManager(_SSTOOLS_BASE_MANAGER):  # type: ignore[misc, valid-type, unused-ignore]
    registeruseroauthview = _SstoolsNoFormRegistration

    def get_oauth_user_info(self, provider: str, resp: _SstoolsAny) -> _SstoolsAny:
        if provider != _SSTOOLS_OIDC_PROVIDER:
            return super().get_oauth_user_info(provider, resp)
        # authlib verified the ID token (signature by a key of the provider's jwks_uri, issuer,
        # audience, expiry, nonce, at_hash) and put its claims here; an answer without one is refused.
        claims = dict(resp.get("userinfo") or {})
        if not claims.get("sub"):
            raise ValueError(f"{provider}: the token response has no verified ID token")
        if claims.get("iss", "").rstrip("/") != _SSTOOLS_OIDC_ISSUER:
            raise ValueError(f"{provider}: the ID token is from {claims.get('iss')!r}")
        if _SSTOOLS_OIDC_USERNAME_CLAIM not in claims or _SSTOOLS_OIDC_GROUPS_CLAIM not in claims:
            # Providers that keep some claims out of the ID token answer them at userinfo.
            extra = dict(self.oauth_remotes[provider].userinfo(token=resp))
            if extra.get("sub") != claims["sub"]:
                raise ValueError(f"{provider}: userinfo is for another subject than the ID token")
            claims = {**extra, **claims}
        username = claims.get(_SSTOOLS_OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username:
            raise ValueError(f"{provider}: no {_SSTOOLS_OIDC_USERNAME_CLAIM!r} claim for {claims['sub']!r}")
        groups = claims.get(_SSTOOLS_OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        first_name, last_name = _sstools_oidc_names(claims, username)
        email = claims.get("email")
        return {
            "username": username,
            "email": email if isinstance(email, str) else "",
            "first_name": first_name,
            "last_name": last_name,
            "role_keys": [group for group in groups if isinstance(group, str)],
        }

    def _oauth_calculate_user_roles(self, userinfo: _SstoolsAny) -> _SstoolsAny:
        # The mapped roles alone: no AUTH_USER_REGISTRATION_ROLE on top of them.
        return list(self.get_roles_from_keys(userinfo.get("role_keys", [])))

    def auth_user_oauth(self, userinfo: _SstoolsAny) -> _SstoolsAny:
        username = userinfo.get("username")
        if not isinstance(username, str) or not username:
            return None
        user = self.find_user(username=username)
        if user is not None and user.username != username:
            # FAB finds users without regard to case; ops acts by the exact name.
            _sstools_oidc_log.warning(
                "sign-in refused: %r is not the existing user %r", username, user.username
            )
            return None
        if not self.get_roles_from_keys(userinfo.get("role_keys", [])):
            if user is not None and user.roles:
                user.roles = []
                self.update_user(user)
            _sstools_oidc_log.warning(
                "sign-in refused: no role for %r's groups %s", username, userinfo.get("role_keys", [])
            )
            return None
        return super().auth_user_oauth(userinfo)


AUTH_TYPE = _SSTOOLS_AUTH_OAUTH
OAUTH_PROVIDERS = [
    {
        "name": _SSTOOLS_OIDC_PROVIDER,
        "icon": "fa-sign-in",
        "token_key": "access_token",
        "remote_app": {
            "client_id": _sstools_oidc_text("SSTOOLS_OIDC_CLIENT_ID"),
            "client_secret": _sstools_oidc_text("SSTOOLS_OIDC_CLIENT_SECRET"),
            "server_metadata_url": f"{_SSTOOLS_OIDC_ISSUER}/.well-known/openid-configuration",
            "client_kwargs": {
                "scope": "openid profile email groups",
                "code_challenge_method": "S256",
                "default_timeout": 10,
            },
        },
    }
]
AUTH_ROLES_MAPPING = _SSTOOLS_OIDC_ROLES_MAPPING
AUTH_ROLES_SYNC_AT_LOGIN = True
AUTH_USER_REGISTRATION = True
# No role for merely being registered (FAB's default gives "Public", which PUBLIC_ROLE_LIKE may
# make Gamma): the mapped roles or no sign-in at all.
AUTH_USER_REGISTRATION_ROLE = None
# The REST login with a password ("provider": "db"), which AUTH_OAUTH would refuse: ops' service
# account signs in through it.
AUTH_API_LOGIN_ALLOW_MULTIPLE_PROVIDERS = True
CUSTOM_SECURITY_MANAGER = SstoolsOidcSecurityManager
