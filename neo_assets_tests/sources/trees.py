"""What the envelope tests share: the file cap, two commit times, the secret kept outside
every root, and ``reasons`` (each path's skip reason)."""

from neo_assets.sources.model import Envelope

CAP = 1000
T1 = 1_700_000_000.0
T2 = 1_700_003_600.0
SECRET = b"TOP-SECRET outside the repository\n"


def reasons(envelope: Envelope) -> dict[str, str | None]:
    return {e.path: e.skip_reason for e in envelope.entries}
