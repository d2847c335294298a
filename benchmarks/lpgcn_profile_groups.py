"""Group a cProfile of the LP-GCN epoch by what the code is (routing, checks, ledger, sealing, ...).

Self time of library code (numpy, torch, scipy, builtins) is attributed to the project functions
that call it, in proportion to the cumulative time of each call edge, so every share names project code.
Prints a Markdown table of shares per group and the top project functions (self time plus the
library time they call directly).

Example::

    python benchmarks/lpgcn_profile_groups.py /tmp/acc.prof [/tmp/real.prof ...]
"""

from __future__ import annotations

import pstats
import sys
from collections import defaultdict
from collections.abc import Callable

Func = tuple[str, int, str]

SEALING = ("runtime/sealing.py", "runtime/batching.py", "runtime/codec.py", "crypto/")
SEALING_NAMES = ("_seal", "_open", "_channel_for", "_charge", "_multicast_groups", "group_key")
LEDGER_NAMES = ("_book", "_sent", "_received", "_check_payload", "sizes", "uniform_size")
CHECKS = ("runtime/expect.py", "lpgcn/expect.py")
CHECK_NAMES = ("handle", "begin_stage", "require_senders", "_same_readonly", "known_field", "__post_init__")
ROUTING = ("server_train.py", "server_setup.py", "runtime/part.py", "runtime/blocks.py", "runtime/local.py",
           "runtime/transport.py", "runtime/message.py")  # fmt: skip
PACKING_NAMES = ("_conv_part", "_user_part", "_senders", "_token_columns", "_negative_requests",
                 "_gradient_messages", "_local_table", "_relayed_rows", "_placement", "tokens_of",
                 "grouped")  # fmt: skip
LOOKUP = ("lpgcn/lookup.py",)
LOOKUP_NAMES = ("find", "position", "local_position", "held_entry", "conv_entry", "_id_index", "_owners",
                "_conv_position", "_take_batch", "_direct_rows", "conv_token_index")  # fmt: skip
COMPUTE = ("protocols/lpgcn/", "protocols/common.py", "protocols/optim.py", "models/")

RULES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("sealing (AEAD, batch framing, codec)", lambda f, n: any(x in f for x in SEALING) or n in SEALING_NAMES),
    (
        "ledger bookkeeping (sizes, per-client bytes)",
        lambda f, n: "runtime/ledger.py" in f or n in LEDGER_NAMES,
    ),
    ("validation / expectation checks", lambda f, n: any(x in f for x in CHECKS) or n in CHECK_NAMES),
    ("routing (server relay and sync, part views)", lambda f, n: any(x in f for x in ROUTING)),
    ("per-part packing, numpy-torch conversions", lambda f, n: n in PACKING_NAMES),
    ("batch lookups (ids, pairs, tokens)", lambda f, n: any(x in f for x in LOOKUP) or n in LOOKUP_NAMES),
    ("model compute (Eqs. 7/8, BPR, Adam, gathers)", lambda f, n: any(x in f for x in COMPUTE)),
    ("driver (learner, sampler)", lambda f, n: "training/" in f),
]
LIBRARY = ("site-packages", "/lib/python3", "{", "~")


def category(func: Func) -> str | None:
    """The group of a project function (``None``: library code, attributed to its callers)."""
    path, _, name = func
    if any(x in path for x in LIBRARY):
        return None
    return next((label for label, rule in RULES if rule(path, name)), "other project code")


def groups(stats: dict) -> dict[str, float]:  # type: ignore[type-arg]
    """Seconds of self time per group, library time following its callers."""
    memo: dict[Func, dict[str, float]] = {}

    def shares(func: Func, depth: int = 0) -> dict[str, float]:
        if func not in memo:
            cat = category(func)
            callers = stats[func][4]
            if cat is not None or depth > 30 or not callers:
                memo[func] = {cat or "other": 1.0}
            else:
                total = sum(v[3] for v in callers.values()) or 1.0
                out: dict[str, float] = defaultdict(float)
                for caller, edge in callers.items():
                    for k, w in shares(caller, depth + 1).items():
                        out[k] += w * edge[3] / total
                memo[func] = dict(out)
        return memo[func]

    totals: dict[str, float] = defaultdict(float)
    for func, entry in stats.items():
        for k, w in shares(func).items():
            totals[k] += entry[2] * w
    return totals


def top(stats: dict, n: int = 15) -> list[tuple[float, Func]]:  # type: ignore[type-arg]
    """Project functions by self time plus the library time they call directly."""
    own: dict[Func, float] = defaultdict(float)
    for func, entry in stats.items():
        if category(func) is not None:
            own[func] += entry[2]
        else:
            for caller, edge in entry[4].items():
                if category(caller) is not None:
                    own[caller] += edge[2]
    return sorted(((v, f) for f, v in own.items()), reverse=True)[:n]


def main() -> None:
    for path in sys.argv[1:]:
        stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
        whole = sum(v[2] for v in stats.values())
        print(f"\n{path}\n\n| group | share of self time |\n|---|---|")
        for label, sec in sorted(groups(stats).items(), key=lambda kv: -kv[1]):
            print(f"| {label} | {100 * sec / whole:.1f} % |")
        print("\n| share | function |\n|---|---|")
        for sec, (file, line, name) in top(stats):
            print(f"| {100 * sec / whole:.1f} % | `{file.split('fedgraphrec/')[-1]}:{line} {name}` |")


if __name__ == "__main__":
    main()
