"""The address a request came from, for the sign-in limits.

Behind an ingress the peer is the proxy; the client is in ``X-Forwarded-For``, whose entries
anyone can write except those appended by proxies we trust. So the list is read from the right
while the hop that appended an entry is trusted, and the first entry a stranger could have
written is the client. With no trusted proxies the header is ignored altogether.

A trusted range is where the proxies are, not who they are: a client on a private network
inside it would pass for a proxy, and what it wrote into the header for its own address. So
no more entries are read than there are proxies in front of ops (``hops``: the ingress alone
is one); the entry the first of them appended is the client, whatever lies to its left.
"""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_ADDRESS_LENGTH = 64  # a forged, non-address entry still names one key, not an unbounded one


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated addresses or CIDR ranges; ValueError names a bad one."""
    networks = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"not an address or CIDR range: {item!r}") from None
    return tuple(networks)


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[Network, ...]
    hops: int  # the proxies in front of ops, each appending one entry


def client_address(request: Request, proxies: TrustedProxies) -> str:
    peer = request.client.host if request.client else ""
    entries = [
        entry.strip() for header in request.headers.getlist("x-forwarded-for") for entry in header.split(",")
    ]
    client, believed = peer, 0
    while entries and believed < proxies.hops and _is_trusted(client, proxies.networks):
        client, believed = entries.pop(), believed + 1
    return client[:MAX_ADDRESS_LENGTH] or "unknown"


def _is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)
