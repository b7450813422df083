"""Everything the routes use, made once at start by ``main.assemble`` and handed to the routers."""

from dataclasses import dataclass

from sstools.common.confirmation import ConfirmationCodec
from sstools.ops.api.auth import Authenticator
from sstools.ops.api.clients import TrustedProxies
from sstools.ops.api.guard import HeavyReads
from sstools.ops.backups import Backups
from sstools.ops.deployments import Deployments
from sstools.ops.gitrepo import GitRepository
from sstools.ops.llm import LlmEndpoint
from sstools.ops.oidc import OidcClient
from sstools.ops.signin import SignIns
from sstools.ops.store.audit import AuditLog
from sstools.ops.store.idempotency import IdempotencyStore
from sstools.ops.store.maintenance import MaintenanceStore
from sstools.ops.store.sessions import RefreshTokens
from sstools.ops.store.single_sign_on import SingleSignOnStore
from sstools.ops.store.tasks import TaskStore
from sstools.ops.superset.registry import Supersets
from sstools.ops.tasks import TaskWorker


@dataclass(frozen=True)
class SqlLimits:
    max_rows: int
    timeout_seconds: float


@dataclass(frozen=True)
class SingleSignOn:
    """Single sign-on, when it is on: the provider, and how many sign-ins may be under way."""

    client: OidcClient
    pending_limit: int


@dataclass(frozen=True)
class OpsContext:
    authenticator: Authenticator
    sign_ins: SignIns
    sessions: RefreshTokens
    trusted_proxies: TrustedProxies
    confirmations: ConfirmationCodec
    audit: AuditLog
    supersets: Supersets
    tasks: TaskStore
    worker: TaskWorker
    idempotency: IdempotencyStore
    maintenance: MaintenanceStore
    backups: Backups
    deployments: Deployments
    git: GitRepository
    llm: LlmEndpoint
    sql: SqlLimits
    # how long a slow read's request waits for it before answering with its task to follow
    read_wait_seconds: float
    heavy_reads: HeavyReads
    # One-time rows of single sign-on (kept, and swept, whether or not it is on).
    sso_store: SingleSignOnStore
    single_sign_on: SingleSignOn | None = None
    password_sign_in: bool = True
