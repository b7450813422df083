"""A person's confirmation as ops can check it, instead of a flag a library could drop.

Once a person confirmed a card, the agent's gate signs a short-lived ``confirmation`` token for
that one call: the user, the tool, the call's Idempotency-Key (which the gate derives for it)
and the fingerprint of the exact request the tool will send. Ops refuses a call that needs a
confirmation unless it carries one whose every claim matches the request it received, so a
confirmed call cannot be replayed as another, sent for another user, or changed on the way.
The secret is shared by the agent and ops only; without a user's own token it authorises nothing.
"""

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from sstools.common.tokens import JwtCodec, TokenClaimMissing, TokenType

HEADER = "X-Confirmation"
AUDIENCE = "sstools-ops-confirmation"
# Signed when the person confirmed, checked when ops receives the call a moment later.
TTL = timedelta(seconds=120)


def request_fingerprint(method: str, target: bytes, body: bytes) -> str:
    """The request as it travels: its method, its path with the query string exactly as sent,
    and its body's bytes."""
    return hashlib.sha256(method.upper().encode() + b" " + target + b"\n" + body).hexdigest()


@dataclass(frozen=True)
class Confirmation:
    username: str
    tool: str
    idempotency_key: str
    fingerprint: str


class ConfirmationCodec:
    def __init__(self, secret: str) -> None:
        self._codec = JwtCodec(secret)

    def sign(self, confirmation: Confirmation) -> str:
        claims = {
            "tool": confirmation.tool,
            "call": confirmation.idempotency_key,
            "req": confirmation.fingerprint,
        }
        return self._codec.issue(
            confirmation.username,
            token_type=TokenType.CONFIRMATION,
            audience=AUDIENCE,
            ttl=TTL,
            claims=claims,
        )

    def verify(self, token: str) -> Confirmation:
        """The confirmation a token carries; a ``TokenError`` when it is not a valid one."""
        claims = self._codec.verify(token, audience=AUDIENCE, token_type=TokenType.CONFIRMATION)
        try:
            return Confirmation(
                claims.subject, str(claims.extra["tool"]), str(claims.extra["call"]), str(claims.extra["req"])
            )
        except KeyError as missing:
            raise TokenClaimMissing(f"confirmation lacks the {missing} claim") from None
