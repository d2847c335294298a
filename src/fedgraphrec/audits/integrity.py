"""Integrity audit: a protocol in ``real`` mode against a server that alters or lies about what it relays.

Every attack class of issue 30 is tried on every target it has, in every model variant
(:mod:`fedgraphrec.audits.integrity_runs`), one short run per attempt on two nodes:

- **payload** (:mod:`fedgraphrec.attacks.active_server`): ``flip`` a byte, ``replay`` an earlier
  step's message (every sealed phase relayed at two steps or more; set-up runs once), ``swap`` two
  receivers' messages, ``drop`` a message — on every sealed phase;
- **label forgery** (:mod:`fedgraphrec.attacks.lying_server`): ``downgrade`` a sealed part to plain
  rows of the server's, ``relabel`` it with another phase's name — every sealed phase;
- **cross-phase replay**: another phase's ciphertexts of the same step in the target's place —
  every sealed phase that shares a step with another one, as target or as the replayed phase;
- **same-stage re-run**: ``rerun`` every stage twice in its step;
- **session reset**: ``reset`` (the first stage again at a later step; on Flower with a fresh hello)
  and, on Flower, ``reset-accounted`` (a hello switching the node to ``accounted``);
- **lowered parameters**: ``threshold`` — a lower secure-aggregation threshold, every aggregation;
- **malformed records** (Flower; :mod:`fedgraphrec.attacks.malformed_records`): ``truncate``,
  ``dtype``, ``shape``, ``count`` — every sealed phase and every plain phase with rows.

An attempt is *detected* when a node rejects it with
:class:`~fedgraphrec.crypto.errors.IntegrityError`, *accepted* when the run goes on (or a node leaks
what it should have sealed), and an *error* when the run fails otherwise (not silent, but no clean
refusal either). Coverage compares what the code seals (a clean run's sealed phases, stages and
aggregations) with what was attacked, per attack; the audit fails (``passed`` false, a non-zero exit
of ``fedgraphrec audit integrity``) when coverage is below 100 % or anything was accepted.
``integrity.json`` / ``integrity.md`` list attempts, detected, errors and accepted per class, per
attack and per target (phase, stage or aggregation), and every attempt with its outcome.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from fedgraphrec.attacks.active_server import ATTACKS, ActiveServer
from fedgraphrec.attacks.lying_server import LyingServer
from fedgraphrec.audits.integrity_runs import (
    NODES,
    STEPS,
    Catalogue,
    LearnerFactory,
    arms,
    catalogue,
    in_process,
    run_once,
)
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import TrainConfig

__all__ = ["CLASSES", "INTEGRITY_PROTOCOLS", "attacks_for", "audit_integrity"]

INTEGRITY_PROTOCOLS = ("lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "pgcn")
"""Protocols whose relayed messages are sealed, hence attacked here."""

CLASSES: dict[str, str] = {
    **{a: "payload" for a in ATTACKS},
    "downgrade": "label forgery",
    "relabel": "label forgery",
    "cross-phase": "cross-phase replay",
    "rerun": "same-stage re-run",
    "reset": "session reset",
    "reset-accounted": "session reset",
    "threshold": "lowered parameters",
    **{a: "malformed records" for a in ("truncate", "dtype", "shape", "count")},
}
"""Every attack, in report order, and its class."""

Engine = Literal["inprocess", "flower"]
_FLOWER_ONLY = ("reset-accounted", "truncate", "dtype", "shape", "count")
_SESSION = "session"


def attacks_for(engine: Engine) -> list[str]:
    """The attacks that apply on ``engine`` (hello and records exist on Flower only)."""
    return [a for a in CLASSES if engine == "flower" or a not in _FLOWER_ONLY]


def _targets(attack: str, cat: Catalogue) -> tuple[list[str], list[str]]:
    """(targets tried, targets that coverage requires) of ``attack`` in a clean run's catalogue."""
    sealed = list(cat.sealed)
    if attack == "replay":  # needs the phase at an earlier step: set-up phases have no instance
        many = [p for p in sealed if len(cat.steps.get(p, [])) > 1]
        return many, many
    if attack in ("truncate", "dtype", "shape", "count"):
        return sealed + [p for p in cat.plain if p not in cat.sealed], sealed
    if attack == "cross-phase":  # needs another sealed phase in the same step (as target or donor)
        together = [
            p for p in sealed if any(q != p and set(cat.steps[q]) & set(cat.steps[p]) for q in sealed)
        ]
        return sealed, together
    if attack == "rerun":
        return list(cat.stages), list(cat.stages)
    if attack in ("reset", "reset-accounted"):
        return [_SESSION], [_SESSION]
    if attack == "threshold":
        return list(cat.secagg), list(cat.secagg)
    return sealed, sealed


def _adversary(attack: str, target: str, cat: Catalogue, seed: int) -> ActiveServer | LyingServer:
    if attack in ATTACKS:
        return ActiveServer(attack, target, numpy_rng(seed, "audit-integrity", attack, target))
    return LyingServer(attack, None if target == _SESSION else target, cat.sealed, max(cat.last_step, 1))


def _attempt(arm: TrainConfig, factory: LearnerFactory, adv: ActiveServer | LyingServer) -> tuple[str, str]:
    """Run once with ``adv``; the outcome and the error text."""
    try:
        run_once(arm, factory, adv)
        outcome, message = "accepted", ""
    except IntegrityError as exc:
        outcome, message = "detected", str(exc)
    except Exception as exc:  # any other failure is reported as such, never hidden
        outcome, message = "error", f"{type(exc).__name__}: {exc}"
    if not adv.fired:
        return "no instance", message
    if isinstance(adv, LyingServer) and adv.leaked:
        return "accepted", "a node replied with a sealed part in the clear"
    return outcome, message


def audit_integrity(
    cfg: TrainConfig,
    out_dir: str | Path,
    *,
    engine: Engine = "inprocess",
    factory: LearnerFactory | None = None,
    attacks: list[str] | None = None,
) -> dict[str, Any]:
    """Run every attack on every target of every variant of ``cfg.protocol``; write ``integrity.json/.md``.

    Args:
        cfg: the protocol, dataset and sizes (crypto, dtype and variants are the audit's).
        out_dir: report folder.
        engine: ``inprocess`` or ``flower`` (which attacks apply; the report names it).
        factory: the learner of one run (default: in process on two nodes; the Flower engine's
            comes from ``fedgraphrec.engines.flower.loopback``).
        attacks: a subset of :func:`attacks_for` (default: all of them).
    """
    if cfg.protocol not in INTEGRITY_PROTOCOLS:
        raise ValueError(
            f"audit integrity: protocol must be one of {', '.join(INTEGRITY_PROTOCOLS)}, got {cfg.protocol!r}"
        )
    if engine not in ("inprocess", "flower"):
        raise ValueError(f"audit integrity: engine must be 'inprocess' or 'flower', got {engine!r}")
    make = factory or in_process
    chosen = attacks_for(engine) if attacks is None else attacks
    unknown = [a for a in chosen if a not in attacks_for(engine)]
    if unknown:
        raise ValueError(
            f"audit integrity: unknown attack(s) on {engine}: {unknown}; known: {attacks_for(engine)}"
        )
    rows: list[dict[str, Any]] = []
    coverage: dict[str, dict[str, Any]] = {a: {"required": [], "attacked": []} for a in chosen}
    variants = []
    for label, arm in arms(cfg):
        cat = catalogue(arm, make)
        variants.append({"variant": label, "sealed_phases": list(cat.sealed), "stages": cat.stages})
        for attack in chosen:
            tried, required = _targets(attack, cat)
            coverage[attack]["required"] += [f"{label}:{t}" for t in required]
            for target in tried:
                adv = _adversary(attack, target, cat, cfg.seed)
                outcome, message = _attempt(arm, make, adv)
                detail = adv.detail if isinstance(adv, LyingServer) else ""
                rows.append({"variant": label, "class": CLASSES[attack], "attack": attack, "target": target,
                             "outcome": outcome, "detail": detail, "error": message})  # fmt: skip
                if outcome != "no instance":
                    coverage[attack]["attacked"].append(f"{label}:{target}")
                    if attack == "cross-phase" and detail:  # the replayed phase is attacked too
                        coverage[attack]["attacked"].append(f"{label}:{detail}")
    return _report(cfg, engine, chosen, rows, coverage, variants, Path(out_dir))


def _report(
    cfg: TrainConfig,
    engine: str,
    chosen: list[str],
    rows: list[dict[str, Any]],
    coverage: dict[str, dict[str, Any]],
    variants: list[dict[str, Any]],
    out: Path,
) -> dict[str, Any]:
    def count(select: list[dict[str, Any]]) -> dict[str, int]:
        tried = [r for r in select if r["outcome"] != "no instance"]
        return {
            "attempts": len(tried),
            "detected": sum(r["outcome"] == "detected" for r in tried),
            "errors": sum(r["outcome"] == "error" for r in tried),
            "accepted": sum(r["outcome"] == "accepted" for r in tried),
        }

    summary = {a: {"class": CLASSES[a], **count([r for r in rows if r["attack"] == a])} for a in chosen}
    classes = {
        c: count([r for r in rows if r["class"] == c]) for c in dict.fromkeys(CLASSES[a] for a in chosen)
    }
    targets = dict.fromkeys(f"{r['variant']}:{r['target']}" for r in rows)
    by_target = {t: count([r for r in rows if f"{r['variant']}:{r['target']}" == t]) for t in targets}
    for cov in coverage.values():
        required = list(dict.fromkeys(cov["required"]))
        hit = set(cov["attacked"])
        cov["required"] = required
        cov["attacked"] = [t for t in required if t in hit]
        cov["missing"] = [t for t in required if t not in hit]
        cov["percent"] = 100.0 * len(cov["attacked"]) / len(required) if required else 100.0
    coverage_ok = all(len(c["missing"]) == 0 for c in coverage.values())
    accepted = sum(r["outcome"] == "accepted" for r in rows)
    report = {
        "protocol": cfg.protocol,
        "engine": engine,
        "dataset": cfg.dataset,
        "seed": cfg.seed,
        "nodes": NODES,
        "steps": STEPS,
        "variants": variants,
        "classes": classes,
        "summary": summary,
        "targets": by_target,
        "coverage": coverage,
        "coverage_ok": coverage_ok,
        "accepted": accepted,
        "passed": coverage_ok and accepted == 0,
        "attempts": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "integrity.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "integrity.md").write_text(_markdown(report))
    return report


def _markdown(report: dict[str, Any]) -> str:
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = [
        f"# Integrity audit: {report['protocol']} on {report['dataset']} "
        f"({report['engine']} engine, real crypto, {report['nodes']} nodes, seed {report['seed']}): "
        f"{verdict}",
        "",
        "A lying server tries one attack per run. *detected*: a node rejected it (IntegrityError);",
        "*accepted*: the run went on with it (or a node leaked what it should have sealed); *errors*: the",
        "run failed otherwise. Goal: accepted 0 and 100 % coverage of what the code seals.",
        "",
        f"Variants: {', '.join(v['variant'] for v in report['variants'])}.",
        "",
        "| class | attempts | detected | errors | accepted |",
        "|---|---|---|---|---|",
    ]
    for name, s in report["classes"].items():
        lines.append(f"| {name} | {s['attempts']} | {s['detected']} | {s['errors']} | {s['accepted']} |")
    lines += ["", "| attack | class | attempts | detected | errors | accepted | coverage | missing |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for attack, s in report["summary"].items():
        cov = report["coverage"][attack]
        missing = ", ".join(cov["missing"]) or "-"
        share = f"{cov['percent']:.0f} % ({len(cov['attacked'])}/{len(cov['required'])})"
        share = share if cov["required"] else "n/a (no target)"
        lines.append(
            f"| {attack} | {s['class']} | {s['attempts']} | {s['detected']} | {s['errors']} "
            f"| {s['accepted']} "
            f"| {share} | {missing} |"
        )
    lines += ["", "| variant:target (phase, stage, aggregation) | attempts | detected | errors | accepted |",
              "|---|---|---|---|---|"]  # fmt: skip
    for name, s in report["targets"].items():
        lines.append(f"| {name} | {s['attempts']} | {s['detected']} | {s['errors']} | {s['accepted']} |")
    lines += ["", "| variant | attack | target | outcome | detail |", "|---|---|---|---|---|"]
    for r in report["attempts"]:
        lines.append(f"| {r['variant']} | {r['attack']} | {r['target']} | {r['outcome']} | {r['detail']} |")
    never = [r for r in report["attempts"] if r["outcome"] == "no instance"]
    if never:
        lines += ["", f"{len(never)} attempt(s) found no instance of the attack on that target; they are not",
                  "counted, and coverage says whether a required target was left unattacked."]  # fmt: skip
    return "\n".join(lines) + "\n"
